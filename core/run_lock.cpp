#include "core/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <regex>

#include "core/communicator.h"
#include "core/error.h"
#include "core/log.h"

namespace mrmf {
namespace fs = std::filesystem;

namespace {
constexpr const char* kLockName = ".mrmf.lock";

// What the holder wrote into the lock file: "pid <n> on <host>".
std::string holder_of(const fs::path& lock) {
  char buf[256] = {};
  const int fd = ::open(lock.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  std::string s(buf, n > 0 ? static_cast<size_t>(n) : 0);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}
}  // namespace

RunFolderLock::RunFolderLock(const std::string& dir, const Communicator& world) : dir_(dir) {
  std::string refusal;
  if (world.is_root()) {
    std::error_code ec;
    if (!fs::exists(dir_, ec)) {
      fs::create_directories(dir_, ec);
      created_dir_ = !ec;
    }
    const fs::path lock = fs::path(dir_) / kLockName;
    fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      log::info("notice: cannot create {} ({}): this run folder is not locked against a second command", lock.string(),
                std::strerror(errno));
    } else if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      if (err == EWOULDBLOCK) {
        const std::string who = holder_of(lock);
        refusal = "another mrmf command (" + (who.empty() ? std::string("unknown process") : who) + ") is writing to " +
                  dir_ + "; wait until it ends, stop it, or choose another --out";
      } else {
        log::info("notice: {} cannot be locked ({}): this run folder is not locked against a second command", dir_,
                  std::strerror(err));
      }
      ::close(fd_);
      fd_ = -1;
    } else {
      char host[256] = {};
      ::gethostname(host, sizeof host - 1);
      const std::string who = "pid " + std::to_string(::getpid()) + " on " + host + "\n";
      if (::ftruncate(fd_, 0) != 0 || ::write(fd_, who.data(), who.size()) < 0) {
        // the lock holds without the note; a refused command then names no process
      }
    }
  }
  const std::string agreed = world.broadcast_string(refusal, 0);
  if (!agreed.empty()) {
    if (world.is_root()) {
      std::error_code ec;
      if (created_dir_) fs::remove_all(dir_, ec);  // made for nothing: the other command's folder is elsewhere
    }
    MRMF_THROW(Usage, agreed);
  }
}

RunFolderLock::~RunFolderLock() {
  if (fd_ < 0) return;
  std::error_code ec;
  if (created_dir_) {
    // Nothing but the lock file: the command stopped before writing.
    bool only_lock = true;
    for (const auto& e : fs::directory_iterator(dir_, ec))
      if (e.path().filename() != kLockName) only_lock = false;
    if (!ec && only_lock) {
      fs::remove(fs::path(dir_) / kLockName, ec);
      fs::remove(dir_, ec);
    }
  }
  ::close(fd_);
}

int RunFolderLock::remove_partial_files() const {
  if (fd_ < 0) return 0;  // not locked (or not rank 0): another writer may own them
  static const std::regex partial(R"(.+\.tmp\.[0-9]+\.[0-9]+)");
  int removed = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir_, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    std::error_code e2;
    if (it->is_regular_file(e2) && std::regex_match(it->path().filename().string(), partial) &&
        fs::remove(it->path(), e2))
      ++removed;
  }
  if (removed > 0)
    log::info("removed {} partial file(s) an interrupted command left in {} (*.tmp.<pid>.<n>)", removed, dir_);
  return removed;
}

}  // namespace mrmf
