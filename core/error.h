// mrmf error handling: one exception type and one family of check macros.
//
// Every failure -- a bad argument, a CUDA/cuDNN/cuBLAS/NCCL/MPI/HDF5 call that
// returned an error -- becomes an mrmf::Error whose message carries
//   file:line, the failing call (or condition), the library's status text, and the MPI rank.
// The library-specific macros live next to the library headers (check_cuda.h,
// check_mpi.h, check_hdf5.h) so that CPU-only translation units never include CUDA.
// Destructors must never throw: they use MRMF_*_WARN variants that log instead.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace mrmf {

// What kind of failure; the command line maps kinds to exit codes
// (Usage/Config -> 2, everything else -> 1).
enum class ErrorKind { Runtime, Usage, Config, Data, Shape, Device };

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& what, std::string message = "")
      : std::runtime_error(what), kind_(kind), message_(message.empty() ? what : std::move(message)) {}
  ErrorKind kind() const noexcept { return kind_; }
  // The message alone, without the "[rank R] file:line:" prefix -- what a
  // command line shows for usage and configuration errors.
  const std::string& message() const noexcept { return message_; }

 private:
  ErrorKind kind_;
  std::string message_;
};

// The MPI rank used in messages: set once the communicator exists; before
// that the launcher's environment (PMI_RANK, SLURM_PROCID, ...) is consulted.
void set_error_rank(int rank);
int error_rank();

namespace detail {
[[noreturn]] void throw_error(ErrorKind kind, const char* lib, const char* call, const std::string& status,
                              const char* file, int line);
// Logs instead of throwing: for destructors and cleanup paths.
void warn_error(const char* lib, const char* call, const std::string& status, const char* file, int line) noexcept;

template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail
}  // namespace mrmf

// Argument / invariant checks: MRMF_CHECK(n > 0, "batch size must be positive, got ", n);
#define MRMF_CHECK(cond, ...)                                                                             \
  do {                                                                                                    \
    if (!(cond))                                                                                          \
      ::mrmf::detail::throw_error(::mrmf::ErrorKind::Runtime, "mrmf", #cond,                              \
                                  ::mrmf::detail::concat(__VA_ARGS__), __FILE__, __LINE__);               \
  } while (0)

// Same, but with an explicit kind (Shape, Config, Data, Usage, Device). These
// are user-facing: the message says what is wrong, without the C++ condition.
#define MRMF_CHECK_KIND(kind, cond, ...)                                                                  \
  do {                                                                                                    \
    if (!(cond))                                                                                          \
      ::mrmf::detail::throw_error(::mrmf::ErrorKind::kind, "mrmf", "",                                    \
                                  ::mrmf::detail::concat(__VA_ARGS__), __FILE__, __LINE__);               \
  } while (0)

#define MRMF_THROW(kind, ...)                                                                             \
  ::mrmf::detail::throw_error(::mrmf::ErrorKind::kind, "mrmf", "", ::mrmf::detail::concat(__VA_ARGS__), \
                              __FILE__, __LINE__)
