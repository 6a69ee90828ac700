// Check macros for HDF5. HDF5 signals failure with a negative return (herr_t,
// hid_t, htri_t); its own error stack is printed to stderr by default, which
// the data layer silences (H5Eset_auto) so that our exception is the one message.
// The status text is the innermost message of HDF5's error stack.
#pragma once

#include <hdf5.h>

#include <string>

#include "core/error.h"

namespace mrmf::detail {
// The innermost message of HDF5's error stack, which it clears; a message
// that reports damage (hdf5_reports_damage) says so in words.
std::string hdf5_error_text();
// Whether an hdf5_error_text() reports a changed byte (a checksum that does
// not match): damage, which lookups must not take for absence.
bool hdf5_reports_damage(const std::string& text);
}

#define MRMF_H5_CHECK(call)                                                                                   \
  ([&]() {                                                                                                    \
    auto mrmf_st_ = (call);                                                                                   \
    if (mrmf_st_ < 0)                                                                                         \
      ::mrmf::detail::throw_error(::mrmf::ErrorKind::Data, "HDF5", #call, ::mrmf::detail::hdf5_error_text(), \
                                  __FILE__, __LINE__);                                                        \
    return mrmf_st_;                                                                                          \
  }())

#define MRMF_H5_WARN(call)                                                                                     \
  do {                                                                                                         \
    if ((call) < 0) ::mrmf::detail::warn_error("HDF5", #call, ::mrmf::detail::hdf5_error_text(), __FILE__, __LINE__); \
  } while (0)
