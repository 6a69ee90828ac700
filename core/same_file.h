// Whether two paths name the same file or folder: the same path once made
// absolute and normalised, or -- both existing -- the same inode, which also
// catches symbolic and hard links (an output that is one of the inputs would
// otherwise be truncated before the input is read). Never throws.
#pragma once

#include <filesystem>
#include <string>

namespace mrmf {

inline bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path pa = fs::absolute(a, ec).lexically_normal();
  const fs::path pb = fs::absolute(b, ec).lexically_normal();
  if (!ec && pa == pb) return true;
  return fs::exists(a, ec) && fs::exists(b, ec) && fs::equivalent(a, b, ec) && !ec;
}

}  // namespace mrmf
