#include "data/hdf5_crash_note.h"

#include <signal.h>  // sigaction (POSIX)
#include <unistd.h>  // write

#include <algorithm>
#include <atomic>
#include <cstring>

namespace mrmf::data {
namespace {

// Only async-signal-safe work in the handler: a fixed buffer written by
// note_hdf5_file_opened and read by the handler, and write(2). A path
// noted while the handler runs may read torn; the note is advice.
constexpr size_t kPathBytes = 4096;
char g_path[kPathBytes];
std::atomic<bool> g_noted{false};
int g_rank = 0;
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
  if (g_noted.load(std::memory_order_acquire)) {
    char rank[16];
    int r = g_rank, n = 0;
    char digits[16];
    do {
      digits[n++] = static_cast<char>('0' + r % 10);
      r /= 10;
    } while (r > 0 && n < 15);
    for (int i = 0; i < n; ++i) rank[i] = digits[n - 1 - i];
    rank[n] = '\0';
    put("mrmf: fatal: [rank ");
    put(rank);
    put("] ");
    put(signal_text(sig));
    put(". The last HDF5 file this process opened for reading is ");
    put(g_path);
    put(": libhdf5 crashes on some damaged files instead of reporting an error. If `h5dump -H` of that file "
        "fails too, the file is damaged: regenerate or re-copy it.\n");
  }
  // The previous handler, or the default action: for a fault, returning
  // re-executes the instruction, which faults again into it; abort()
  // raises again itself when a handler returns.
  sigaction(sig, &g_previous[slot], nullptr);
  (void)info;
  (void)context;
}

}  // namespace

void note_hdf5_file_opened(const std::string& path) noexcept {
  const size_t n = std::min(path.size(), kPathBytes - 1);
  g_noted.store(false, std::memory_order_release);
  std::memcpy(g_path, path.data(), n);
  g_path[n] = '\0';
  g_noted.store(true, std::memory_order_release);
}

void install_hdf5_crash_note(int rank) noexcept {
  static std::atomic<bool> installed{false};
  if (installed.exchange(true)) return;
  g_rank = rank;
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &sa, &g_previous[i]);
}

}  // namespace mrmf::data
