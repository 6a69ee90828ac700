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

// A usage error (exit 2) when the output FILE `path` exists and `force` is
// not given, and whatever `force` says when it exists but is no regular file:
// a folder (the rename that commits the output would fail late), a device
// or a FIFO (which the rename would replace, /dev/null included, as root).
inline void refuse_existing_output(const std::string& path, bool force) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) return;
  MRMF_CHECK_KIND(Usage, fs::is_regular_file(st), path, " exists and is ",
                  fs::is_directory(st) ? "a folder" : "not a regular file", "; the output must be a file");
  MRMF_CHECK_KIND(Usage, force, path, " already exists; --force replaces it");
}

}  // namespace mrmf
