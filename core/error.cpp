#include "core/error.h"

#include <atomic>
#include <cstdlib>

#include "core/log.h"

namespace mrmf {
namespace {
std::atomic<int> g_rank{-1};

int rank_from_environment() {
  // Launchers export the rank before MPI_Init: MPICH/Hydra (PMI_RANK), Slurm, Open MPI.
  for (const char* var : {"PMI_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"}) {
    if (const char* v = std::getenv(var)) return std::atoi(v);
  }
  return 0;
}
}  // namespace

void set_error_rank(int rank) { g_rank.store(rank); }

int error_rank() {
  int r = g_rank.load();
  return r >= 0 ? r : rank_from_environment();
}

namespace detail {
static std::string format_message(const char* lib, const char* call, const std::string& status, const char* file,
                                  int line) {
  std::ostringstream os;
  os << "[rank " << error_rank() << "] " << file << ":" << line << ": ";
  if (lib && std::string(lib) != "mrmf") os << lib << " error: ";
  if (!status.empty()) os << status;
  if (call && *call) os << (status.empty() ? "" : " ") << "(in `" << call << "`)";
  return os.str();
}

void throw_error(ErrorKind kind, const char* lib, const char* call, const std::string& status, const char* file,
                 int line) {
  throw Error(kind, format_message(lib, call, status, file, line), status);
}

void warn_error(const char* lib, const char* call, const std::string& status, const char* file, int line) noexcept {
  try {
    log::warn("{}", format_message(lib, call, status, file, line));
  } catch (...) {
    // Logging itself failed; nothing sensible is left to do in a cleanup path.
  }
}
}  // namespace detail
}  // namespace mrmf
