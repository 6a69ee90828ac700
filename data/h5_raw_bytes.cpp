#include "data/h5_raw_bytes.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace mrmf::data {

RawFileBytes::RawFileBytes(const std::string& path, const std::string& where) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  MRMF_CHECK_KIND(Data, fd_ >= 0, where, ": cannot open ", path, " to check its metadata (", std::strerror(errno), ")");
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    MRMF_THROW(Data, where, ": cannot stat ", path, " (", std::strerror(err), ")");
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

RawFileBytes::~RawFileBytes() {
  if (fd_ >= 0) ::close(fd_);
}

RawFileBytes::RawFileBytes(RawFileBytes&& other) noexcept : fd_(other.fd_), size_(other.size_) { other.fd_ = -1; }

bool RawFileBytes::read(uint64_t offset, void* out, uint64_t n) const {
  if (!holds(offset, n)) return false;
  auto* p = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t got = ::pread(fd_, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<uint64_t>(got);
  }
  return true;
}

}  // namespace mrmf::data
