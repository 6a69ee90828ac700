// The project's source tree, for tests that read what ships beside the code
// (configs/, scripts/, docs/).
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>

namespace mrmf::testing {

// The first parent of the test binary (or of the working directory) holding
// configs/ and scripts/slurm/; empty when neither lies in the tree.
inline std::filesystem::path source_root() {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (fs::path start : {fs::read_symlink("/proc/self/exe", ec), fs::current_path()})
    for (fs::path d = start; !d.empty() && d != d.root_path(); d = d.parent_path()) {
      if (fs::is_directory(d / "configs") && fs::is_directory(d / "scripts" / "slurm")) return d;
    }
  return {};
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace mrmf::testing
