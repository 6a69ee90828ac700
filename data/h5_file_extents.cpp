#include "data/h5_file_extents.h"

#include <algorithm>

#include "core/error.h"

namespace mrmf::data {

uint32_t FileExtents::owner(const std::string& name) {
  owners_.push_back(name);
  return static_cast<uint32_t>(owners_.size() - 1);
}

void FileExtents::add(uint64_t at, uint64_t length, Kind kind, uint32_t owner) {
  if (length == 0) return;
  extents_.push_back({at, length > ~uint64_t{0} - at ? ~uint64_t{0} : at + length, kind, owner});
}

std::string FileExtents::describe(const Extent& e) const {
  const std::string& of = owners_.at(e.owner);
  std::string what;
  switch (e.kind) {
    case Kind::superblock: what = "the superblock"; break;
    case Kind::object_header: what = "an object header block of " + of; break;
    case Kind::group_tree: what = "a B-tree node of " + of; break;
    case Kind::symbol_node: what = "a symbol-table node of " + of; break;
    case Kind::local_heap: what = "the local heap of " + of; break;
    case Kind::chunk_tree: what = "a chunk B-tree node of " + of; break;
    case Kind::chunk: what = "a chunk of " + of; break;
    case Kind::contiguous: what = "the data of " + of; break;
  }
  return what + " (" + std::to_string(e.end - e.at) + " bytes at file offset " + std::to_string(e.at) + ")";
}

void FileExtents::check(const std::string& path, uint64_t end) {
  std::sort(extents_.begin(), extents_.end(), [](const Extent& a, const Extent& b) { return a.at < b.at; });
  for (const Extent& e : extents_)
    if (e.end > end)
      MRMF_THROW(Data, path, ": the superblock says the file's data end at file offset ", end, ", before the end of ",
                 describe(e), "; libhdf5 would read what lies past it as other values. Is the file damaged?");
  // Sorted by start, an extent overlaps an earlier one exactly when it
  // starts before the furthest end so far.
  size_t furthest = 0;
  for (size_t i = 1; i < extents_.size(); ++i) {
    if (extents_[i].at < extents_[furthest].end)
      MRMF_THROW(Data, path, ": the file's structures overlap (", describe(extents_[furthest]), " and ",
                 describe(extents_[i]),
                 "), which a damaged address makes: libhdf5 would read one as the other. Is the file damaged?");
    if (extents_[i].end > extents_[furthest].end) furthest = i;
  }
}

}  // namespace mrmf::data
