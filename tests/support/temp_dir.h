// A fresh directory under the system temp dir, unique per process and per
// instance, removed (without throwing) at scope exit.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <iterator>
#include <string>

namespace mrmf::test {

struct TempDir {
  std::filesystem::path dir;
  explicit TempDir(const std::string& prefix = "mrmf") {
    static std::atomic<int> n{0};
    dir = std::filesystem::temp_directory_path() /
          (prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    std::filesystem::create_directories(dir);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return (dir / name).string(); }
  std::string file(const std::string& name) const { return (dir / name).string(); }
  size_t count() const {
    return static_cast<size_t>(
        std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()));
  }
};

}  // namespace mrmf::test
