// data/chunked_work.h: chunks claimed by several threads run exactly once,
// a waiting thread takes the chunks left, errors reach wait(); and
// core/spin_wait.h, through which its waits spin before they block.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/spin_wait.h"
#include "data/chunked_work.h"

using namespace mrmf::data;

TEST_CASE("chunked work: every chunk runs exactly once, whoever claims it", "[loader]") {
  const int64_t n = 2000;
  std::vector<std::atomic<int>> runs(n);
  for (auto& r : runs) r = 0;
  ChunkedWork w(n, [&](int64_t c) { runs[static_cast<size_t>(c)]++; });
  std::vector<std::thread> helpers;
  for (int t = 0; t < 3; ++t) helpers.emplace_back([&] { w.help(); });
  w.help_all(2);
  w.wait();
  for (auto& t : helpers) t.join();
  for (int64_t c = 0; c < n; ++c) REQUIRE(runs[static_cast<size_t>(c)] == 1);
  w.help();  // nothing left: returns at once
}

TEST_CASE("chunked work: a waiting thread takes the chunks left while one runs", "[loader]") {
  // The producer claims chunk 0 and stays in it until every other chunk is
  // done: only the consumer can have run them.
  const int64_t n = 50;
  std::atomic<bool> started{false}, rest_done{false};
  std::vector<std::thread::id> by(n);
  ChunkedWork w(n, [&](int64_t c) {
    by[static_cast<size_t>(c)] = std::this_thread::get_id();
    if (c == 0) {
      started = true;
      while (!rest_done) std::this_thread::yield();
    }
  });
  std::thread producer([&] {
    w.help();
    w.wait();
  });
  const std::thread::id producer_id = producer.get_id();
  while (!started) std::this_thread::yield();
  w.help();
  rest_done = true;
  w.wait();
  producer.join();
  REQUIRE(by[0] == producer_id);
  for (int64_t c = 1; c < n; ++c) REQUIRE(by[static_cast<size_t>(c)] == std::this_thread::get_id());
}

TEST_CASE("chunked work: a chunk's error reaches wait(), every other chunk still runs", "[loader]") {
  std::vector<int> runs(20, 0);
  ChunkedWork w(20, [&](int64_t c) {
    if (c == 7) throw std::runtime_error("chunk 7 failed");
    runs[static_cast<size_t>(c)]++;
  });
  w.help_all();
  REQUIRE_THROWS_WITH(w.wait(), "chunk 7 failed");
  for (int c = 0; c < 20; ++c) REQUIRE(runs[static_cast<size_t>(c)] == (c == 7 ? 0 : 1));
  ChunkedWork none(0, [](int64_t) { FAIL("no chunk to run"); });
  none.help();
  none.wait();  // zero chunks: done at once
}

TEST_CASE("work offer: await() returns the work offered, or nothing once the job finished", "[loader]") {
  SECTION("finished without an offer (a batch read from HDF5, or cancelled)") {
    WorkOffer o;
    std::thread job([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      o.finish();
    });
    REQUIRE(o.await() == nullptr);
    job.join();
  }
  SECTION("offered, then finished") {
    WorkOffer o;
    auto w = std::make_shared<ChunkedWork>(1, [](int64_t) {});
    std::thread job([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      o.offer(w);
    });
    REQUIRE(o.await() == w);
    job.join();
    w->help();
    o.finish();
    REQUIRE(o.await() == nullptr);  // the job is over: nothing left to join
  }
}

TEST_CASE("spin_until: true as soon as the condition holds, false once its budget is spent", "[loader]") {
  using namespace std::chrono;
  int calls = 0;
  REQUIRE(mrmf::spin_until([&] { return ++calls == 1; }));
  REQUIRE(calls == 1);  // asked once
  std::atomic<bool> flag{false};
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(2));
    flag = true;
  });
  REQUIRE(mrmf::spin_until([&] { return flag.load(); }, seconds(30)));  // returns when set, long before 30 s
  setter.join();
  const auto t0 = steady_clock::now();
  calls = 0;
  REQUIRE_FALSE(mrmf::spin_until([&] { return ++calls < 0; }, microseconds(3000)));
  REQUIRE(steady_clock::now() - t0 >= microseconds(3000));
  REQUIRE(calls > 64);  // it did spin, reading the clock only now and then
}

TEST_CASE("chunked work: a wait() that ends within its spin sees every chunk's writes and error", "[loader]") {
  // Chunks of a few microseconds each on another thread: wait() returns from
  // its spin (not from the condition variable), so what the chunks wrote must
  // be visible through the count alone. Repeated so that a missing ordering
  // has many chances to show (and TSan sees the pattern).
  for (int round = 0; round < 200; ++round) {
    const int64_t n = 8;
    std::vector<int64_t> out(static_cast<size_t>(n * 64), -1);
    const bool fail = round % 10 == 9;
    ChunkedWork w(n, [&](int64_t c) {
      for (int64_t k = 0; k < 64; ++k) out[static_cast<size_t>(c * 64 + k)] = c * 1000 + k + round;
      if (fail && c == n - 1) throw std::runtime_error("last chunk failed");
    });
    std::thread helper([&] { w.help(); });
    if (fail) {
      REQUIRE_THROWS_WITH(w.wait(), "last chunk failed");
    } else {
      w.wait();
    }
    for (int64_t c = 0; c < n; ++c)
      for (int64_t k = 0; k < 64; ++k) REQUIRE(out[static_cast<size_t>(c * 64 + k)] == c * 1000 + k + round);
    helper.join();
  }
  // An offer made while await() spins.
  for (int round = 0; round < 50; ++round) {
    WorkOffer o;
    auto w = std::make_shared<ChunkedWork>(1, [](int64_t) {});
    std::thread job([&] { o.offer(w); });
    REQUIRE(o.await() == w);
    job.join();
  }
}
