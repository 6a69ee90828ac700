#include "data/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/log.h"

namespace mrmf::data {

MappedFile MappedFile::map(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  MRMF_CHECK_KIND(Data, fd >= 0, path, ": cannot open for mapping (", std::strerror(errno), ")");
  struct stat st {};
  const bool stat_ok = ::fstat(fd, &st) == 0;
  const int stat_errno = errno;
  MappedFile m;
  if (stat_ok && st.st_size > 0) {
    void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) {
      m.data_ = static_cast<const char*>(p);
      m.size_ = st.st_size;
    }
  }
  const int map_errno = errno;
  ::close(fd);  // the mapping keeps the file
  MRMF_CHECK_KIND(Data, stat_ok, path, ": cannot stat (", std::strerror(stat_errno), ")");
  MRMF_CHECK_KIND(Data, st.st_size > 0, path, ": empty file");
  MRMF_CHECK_KIND(Data, m.data_ != nullptr, path, ": cannot map (", std::strerror(map_errno), ")");
  return m;
}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    reset();
    data_ = o.data_;
    size_ = o.size_;
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

void MappedFile::reset() noexcept {
  if (data_ && ::munmap(const_cast<char*>(data_), static_cast<size_t>(size_)) != 0)
    log::warn("munmap of a {} byte mapping failed: {}", size_, std::strerror(errno));
  data_ = nullptr;
  size_ = 0;
}

}  // namespace mrmf::data
