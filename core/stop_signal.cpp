#include "core/stop_signal.h"

#include <pthread.h>  // pthread_sigmask, pthread_atfork (POSIX)
#include <signal.h>   // sigaction, sigwait, kill (POSIX)
#include <unistd.h>   // getpid

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <mutex>
#include <thread>

namespace mrmf {
namespace {
std::atomic<int> g_signal{0};

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  return set;
}

// Why a thread that waits, not a handler that runs wherever the signal lands:
// an asynchronous handler runs on the stack of whichever thread the kernel
// picks, and oneDNN's AVX2/AVX-512 GEMM kernels (libdnnl 2.6/3.x before
// oneDNN PR #4855, issue #4845) use rsp as a general register for a moment,
// pointing it into the heap. A handler that ran then wrote its frame over
// heap memory: about one SIGTERM in ten during CPU training ended in
// "free(): invalid pointer" or a segfault instead of a checkpoint. Blocked in
// every thread (the mask is inherited by every thread created after main()
// blocks it: OpenMP's, oneDNN's, the loader's, MPI's), the signals stay
// pending for the process until this thread takes them with sigwait, on its
// own stack, where nothing else runs.
void wait_for_stop_signals() {
  const sigset_t set = stop_signals();
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) == 0) g_signal.store(sig);
  }
}

// A fallback only: a thread that existed before the mask was set (none of
// mrmf's; install runs first in main()) still takes a signal this way.
extern "C" void record_stop_signal(int sig) { g_signal.store(sig); }

// A child process must not inherit the blocked mask (it survives exec, and
// the child would then ignore SIGTERM). Only fork() runs this: a child that
// posix_spawn() or glibc's system()/popen() start keeps the mask, so train
// and experiment start none (a child they need must be spawned with
// posix_spawnattr_setsigmask, or unblock the signals itself).
extern "C" void unblock_stop_signals_in_child() {
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}
}  // namespace

void install_stop_signal_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_handler = record_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;  // reads and waits in progress go on; the trainer stops at the step's end
    for (int sig : {SIGTERM, SIGUSR1}) sigaction(sig, &sa, nullptr);
    const sigset_t set = stop_signals();
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    pthread_atfork(nullptr, nullptr, unblock_stop_signals_in_child);
    // Detached and never joined: it ends with the process, and holds nothing
    // that a static destructor would release.
    std::thread(wait_for_stop_signals).detach();
  });
}

int stop_signal_received() { return g_signal.load(); }

bool send_stop_signal_to_self(int sig, double timeout_s) {
  // Process-directed, as a batch system sends it (raise() would direct it to
  // the calling thread, which blocks it: it would never arrive).
  if (::kill(::getpid(), sig) != 0) return false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (g_signal.load() != sig) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

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
