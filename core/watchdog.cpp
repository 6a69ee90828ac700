#include "core/watchdog.h"

#include <chrono>
#include <cstdlib>
#include <thread>

#include "core/error.h"

namespace mrmf {

double comm_timeout_seconds() {
  const char* env = std::getenv("MRMF_COMM_TIMEOUT_S");
  if (!env || !*env) return 60.0;
  char* end = nullptr;
  const double v = std::strtod(env, &end);
  MRMF_CHECK_KIND(Usage, end && *end == '\0' && v > 0, "MRMF_COMM_TIMEOUT_S='", env,
                  "': expected a positive number of seconds");
  return v;
}

void wait_or_abort(const std::string& what, double timeout_s, const WatchdogHooks& hooks) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  // Spin briefly (most collectives finish within microseconds of the
  // stream), then back off to a 1 ms poll so a long wait costs no CPU.
  for (int polls = 0;; ++polls) {
    if (hooks.done()) return;
    const std::string err = hooks.error ? hooks.error() : std::string();
    const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!err.empty() || waited > timeout_s) {
      if (hooks.abort) hooks.abort();
      if (!err.empty())
        MRMF_THROW(Runtime, what, " failed asynchronously: ", err, " (a peer rank may have died); communicator aborted");
      MRMF_THROW(Runtime, what, " did not complete within ", timeout_s,
                 " s (MRMF_COMM_TIMEOUT_S): a peer rank may have died or stalled; communicator aborted");
    }
    if (polls > 1000) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace mrmf
