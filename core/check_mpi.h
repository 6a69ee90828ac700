// Check macros for MPI. MPI's default error handler aborts the job; the
// communicator layer installs MPI_ERRORS_RETURN so failures become exceptions
// carrying the status text (and the caller decides to MPI_Abort).
#pragma once

#include <mpi.h>

#include <string>

#include "core/error.h"

namespace mrmf::detail {
inline std::string mpi_error_text(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(buf, static_cast<size_t>(len));
}
}  // namespace mrmf::detail

#define MRMF_MPI_CHECK(call)                                                                                   \
  do {                                                                                                         \
    int mrmf_st_ = (call);                                                                                     \
    if (mrmf_st_ != MPI_SUCCESS)                                                                               \
      ::mrmf::detail::throw_error(::mrmf::ErrorKind::Runtime, "MPI", #call, ::mrmf::detail::mpi_error_text(mrmf_st_), \
                                  __FILE__, __LINE__);                                                         \
  } while (0)

#define MRMF_MPI_WARN(call)                                                                                    \
  do {                                                                                                         \
    int mrmf_st_ = (call);                                                                                     \
    if (mrmf_st_ != MPI_SUCCESS)                                                                               \
      ::mrmf::detail::warn_error("MPI", #call, ::mrmf::detail::mpi_error_text(mrmf_st_), __FILE__, __LINE__); \
  } while (0)
