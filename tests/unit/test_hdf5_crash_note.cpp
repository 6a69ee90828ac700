// The note a process writes when it dies of a fault after opening HDF5
// files (data/hdf5_crash_note.h), run in forked children: the note names
// the file, appears once, and the signal still ends the process (the exit
// status says which) -- also for abort() and for a signal sent by another
// process, which the first version swallowed (session 59's review).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "data/hdf5_crash_note.h"
#include "support/temp_dir.h"

using namespace mrmf;

namespace {

struct Death {
  int signal = 0;  // 0: it exited
  int code = 0;
  std::string err;
};

// Runs `act` in a child with the note installed and `noted` recorded;
// `ready` (if given) is told once the child is set up, and `outside` runs in
// the parent then.
template <class Act, class Outside>
Death die(const test::TempDir& tmp, const std::string& noted, Act act, Outside outside) {
  const std::string err = tmp / "stderr.txt";
  int sync[2];
  REQUIRE(::pipe(sync) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int fd = ::open(err.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
    ::dup2(fd, STDERR_FILENO);
    // Catch2's own fatal-signal handlers would be the "previous" ones here:
    // the child would report a failed test of its own.
    for (int sig : {SIGSEGV, SIGBUS, SIGABRT}) ::signal(sig, SIG_DFL);
    data::install_hdf5_crash_note(3);
    data::note_hdf5_file_opened(noted);  // "": none (this process's earlier tests opened files)
    (void)!::write(sync[1], "r", 1);
    act();
    ::_exit(0);
  }
  char c = 0;
  REQUIRE(::read(sync[0], &c, 1) == 1);
  outside(pid);
  int st = 0;
  REQUIRE(::waitpid(pid, &st, 0) == pid);
  ::close(sync[0]);
  ::close(sync[1]);
  Death d;
  d.signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
  d.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::stringstream ss;
  ss << std::ifstream(err).rdbuf();
  d.err = ss.str();
  return d;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("hdf5 crash note: a fault, an abort and a signal from elsewhere each end the process", "[data][h5]") {
  test::TempDir tmp("mrmf_crash_note");
  const auto nothing = [](pid_t) {};
  const std::string note = "mrmf: fatal: [rank 3] ";
  const std::string file = "The last HDF5 file this process opened for reading is /data/cosmo_007.h5.";

  SECTION("a segmentation fault: the note once, then the fault's own end") {
    const Death d = die(
        tmp, "/data/cosmo_007.h5",
        [] {
          volatile int* wild = nullptr;
          *wild = 1;
        },
        nothing);
    CHECK(count(d.err, note + "SIGSEGV (a segmentation fault). " + file) == 1);
#if !defined(__SANITIZE_ADDRESS__)  // AddressSanitizer's handler, chained to, exits instead
    CHECK(d.signal == SIGSEGV);
#endif
  }
  SECTION("abort(), as a corrupted heap or a smashed stack ends: the note, then SIGABRT") {
    const Death d = die(
        tmp, "/data/cosmo_007.h5", [] { std::abort(); }, nothing);
    CHECK(count(d.err, note + "SIGABRT (an abort). " + file) == 1);
    CHECK(d.signal == SIGABRT);
  }
  SECTION("a signal another process sends: no note, and it is not swallowed") {
    const Death d = die(
        tmp, "/data/cosmo_007.h5",
        [] {
          for (;;) ::pause();
        },
        [](pid_t child) { ::kill(child, SIGABRT); });
    CHECK(d.err.find("fatal") == std::string::npos);
    CHECK(d.signal == SIGABRT);
  }
  SECTION("no HDF5 file opened: no note") {
    const Death d = die(
        tmp, "", [] { std::abort(); }, nothing);
    CHECK(d.err.find("fatal") == std::string::npos);
    CHECK(d.signal == SIGABRT);
  }
}
