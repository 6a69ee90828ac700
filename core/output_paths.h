// Guards for the files a command writes: nothing already there is replaced
// without --force, and an output is never one of the inputs.
#pragma once

#include <filesystem>
#include <string>

#include "core/error.h"

namespace mrmf {

// Whether two paths name the same file or folder: the same path once made
// absolute and normalised, or -- both existing -- the same inode, which also
// catches symbolic and hard links (an output that is one of the inputs would
// otherwise be truncated before the input is read). Never throws.
inline bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path pa = fs::absolute(a, ec).lexically_normal();
  const fs::path pb = fs::absolute(b, ec).lexically_normal();
  if (!ec && pa == pb) return true;
  return fs::exists(a, ec) && fs::exists(b, ec) && fs::equivalent(a, b, ec) && !ec;
}

// A usage error (exit 2) when `path` exists and `force` is not given.
inline void refuse_existing_output(const std::string& path, bool force) {
  std::error_code ec;
  MRMF_CHECK_KIND(Usage, force || !std::filesystem::exists(path, ec), path, " already exists; --force replaces it");
}

}  // namespace mrmf
