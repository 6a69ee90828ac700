// The collective watchdog (core/watchdog.h): completion, asynchronous
// errors and the deadline, each with the abort hook called exactly once.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>

#include "core/error.h"
#include "core/watchdog.h"

using namespace mrmf;

namespace {
struct Counters {
  int polls = 0, aborts = 0;
};
}  // namespace

TEST_CASE("watchdog: returns once the operation completes, without aborting", "[watchdog]") {
  Counters c;
  WatchdogHooks h{[&] { return ++c.polls >= 5; }, [] { return std::string(); }, [&] { ++c.aborts; }};
  wait_or_abort("op", 10.0, h);
  CHECK(c.polls == 5);
  CHECK(c.aborts == 0);
}

TEST_CASE("watchdog: an asynchronous error aborts and names the operation and the error", "[watchdog]") {
  Counters c;
  WatchdogHooks h{[&] { return ++c.polls > 100; },
                  [&] { return c.polls >= 3 ? std::string("remote process exited") : std::string(); },
                  [&] { ++c.aborts; }};
  try {
    wait_or_abort("NCCL all-reduce on rank 0 of 2", 10.0, h);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("NCCL all-reduce on rank 0 of 2 failed asynchronously"));
    CHECK_THAT(std::string(e.what()), Catch::Contains("remote process exited"));
  }
  CHECK(c.polls == 3);
  CHECK(c.aborts == 1);
}

TEST_CASE("watchdog: a collective that never completes times out and aborts", "[watchdog]") {
  Counters c;
  WatchdogHooks h{[&] { ++c.polls; return false; }, nullptr, [&] { ++c.aborts; }};
  const auto t0 = std::chrono::steady_clock::now();
  try {
    wait_or_abort("NCCL broadcast", 0.05, h);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("NCCL broadcast did not complete within 0.05 s"));
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(s >= 0.05);
  CHECK(s < 2.0);
  CHECK(c.aborts == 1);
}

TEST_CASE("watchdog: MRMF_COMM_TIMEOUT_S sets the deadline and is validated", "[watchdog]") {
  const char* old = std::getenv("MRMF_COMM_TIMEOUT_S");
  const std::string saved = old ? old : "";
  ::unsetenv("MRMF_COMM_TIMEOUT_S");
  CHECK(comm_timeout_seconds() == 60.0);
  ::setenv("MRMF_COMM_TIMEOUT_S", "2.5", 1);
  CHECK(comm_timeout_seconds() == 2.5);
  for (const char* bad : {"soon", "-3", "0", "5s"}) {
    ::setenv("MRMF_COMM_TIMEOUT_S", bad, 1);
    try {
      comm_timeout_seconds();
      FAIL("accepted " << bad);
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Usage);
      CHECK_THAT(std::string(e.what()), Catch::Contains("MRMF_COMM_TIMEOUT_S"));
    }
  }
  if (old) ::setenv("MRMF_COMM_TIMEOUT_S", saved.c_str(), 1);
  else ::unsetenv("MRMF_COMM_TIMEOUT_S");
}
