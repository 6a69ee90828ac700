#include "core/stop_signal.h"

#include <signal.h>  // sigaction (POSIX)

#include <csignal>
#include <cstdio>
#include <initializer_list>

namespace mrmf {
namespace {
volatile std::sig_atomic_t g_signal = 0;
extern "C" void record_stop_signal(int sig) { g_signal = sig; }
}  // namespace

void install_stop_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = record_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // reads and waits in progress go on; the trainer stops at the step's end
  for (int sig : {SIGTERM, SIGUSR1}) sigaction(sig, &sa, nullptr);
}

int stop_signal_received() { return g_signal; }

namespace {
bool g_stopped = false;  // the main thread's only
}  // namespace
void note_stopped_by_signal() noexcept { g_stopped = true; }
bool stopped_by_signal() noexcept { return g_stopped; }

const char* stop_signal_name(int sig) {
  if (sig == SIGTERM) return "SIGTERM";
  if (sig == SIGUSR1) return "SIGUSR1";
  static thread_local char buf[32];
  std::snprintf(buf, sizeof buf, "signal %d", sig);
  return buf;
}

}  // namespace mrmf
