#include "data/hdf5_crash_note.h"

#include <signal.h>  // sigaction (POSIX)
#include <unistd.h>  // write

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>

namespace mrmf::data {
namespace {

// Only async-signal-safe work in the handler: a fixed buffer written by
// note_hdf5_file_opened and read by the handler, and write(2). A path
// noted while the handler runs may read torn; the note is advice.
constexpr size_t kPathBytes = 4096;
char g_path[kPathBytes];
std::atomic<bool> g_noted{false};
char g_rank[16] = "0";  // formatted at install: the handler only copies
constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGABRT};
struct sigaction g_previous[3];

void put(const char* s) noexcept {
  size_t n = std::strlen(s);
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

const char* signal_text(int sig) noexcept {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV (a segmentation fault)";
    case SIGBUS: return "SIGBUS (a bus error)";
    default: return "SIGABRT (an abort)";
  }
}

void on_fault(int sig, siginfo_t* info, void* context) {
  int slot = 0;
  while (slot < 2 && kSignals[slot] != sig) ++slot;
  // si_code <= 0: sent by kill/raise/abort, not a fault of an instruction.
  // From another process (SI_USER, SI_QUEUE) it says nothing of HDF5.
  const bool sent = info == nullptr || info->si_code <= 0;
  const bool from_elsewhere =
      info != nullptr && (info->si_code == SI_USER || info->si_code == SI_QUEUE) && info->si_pid != ::getpid();
  static std::atomic<bool> reported{false};  // once: a crash may fault again (a back-trace's malloc)
  if (g_noted.load(std::memory_order_acquire) && !from_elsewhere && !reported.exchange(true)) {
    put("mrmf: fatal: [rank ");
    put(g_rank);
    put("] ");
    put(signal_text(sig));
    put(". The last HDF5 file this process opened for reading is ");
    put(g_path);
    put(". libhdf5 crashes on some damaged files instead of reporting an error: if the back-trace shows H5 "
        "functions, check that file (`h5dump -H` fails on a damaged one) and regenerate or re-copy it.\n");
  }
  // Then the previous handler (MPI's back-trace) or the default action.
  // A fault re-executes its instruction on return and faults again into
  // it. A sent signal would be gone: raised again, it is pending (blocked
  // while this handler runs) and arrives when it returns -- abort() alone
  // would raise SIG_DFL itself, skipping the previous handler.
  sigaction(sig, &g_previous[slot], nullptr);
  if (sent) raise(sig);
  (void)context;
}

}  // namespace

void note_hdf5_file_opened(const std::string& path) noexcept {
  const size_t n = std::min(path.size(), kPathBytes - 1);
  g_noted.store(false, std::memory_order_release);
  if (path.empty()) return;  // forgotten
  std::memcpy(g_path, path.data(), n);
  g_path[n] = '\0';
  g_noted.store(true, std::memory_order_release);
}

void install_hdf5_crash_note(int rank) noexcept {
  static std::atomic<bool> installed{false};
  if (installed.exchange(true)) return;
  std::snprintf(g_rank, sizeof g_rank, "%d", rank);
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &sa, &g_previous[i]);
}

}  // namespace mrmf::data
