#include "data/h5_global_heap_check.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/check_hdf5.h"
#include "core/error.h"
#include "data/h5_raw_bytes.h"
#include "data/h5file.h"

namespace mrmf::data {
namespace {

// The HDF5 file format, "Global Heap Collection" (version 1), with 8-byte
// lengths: "GCOL", version, 3 reserved bytes, the collection's size
// (header included); then objects, each a 16-byte header (index, reference
// count, 4 reserved bytes, size) and its data padded to 8 bytes. Index 0
// is free space, whose size counts its header.
constexpr uint64_t kHeapHeader = 16, kObjectHeader = 16;

}  // namespace

void check_vlen_string_type(hid_t type, const std::string& where) {
  if (H5Tget_class(type) != H5T_STRING || H5Tis_variable_str(type) <= 0) return;
  // H5Tencode writes the datatype message (after a 2-byte prefix) with its
  // base type, which the API does not show for strings: the string's class
  // and version byte, 3 class-bit bytes, its 4-byte size; then the base
  // type's class byte, class bits and size.
  size_t n = 0;
  MRMF_H5_CHECK(H5Tencode(type, nullptr, &n));
  std::vector<unsigned char> code(n);
  MRMF_H5_CHECK(H5Tencode(type, code.data(), &n));
  constexpr size_t kBase = 2 + 8;
  if (n < kBase + 8 || (code[2] & 0x0f) != H5T_VLEN) return;  // not the layout this check knows
  const unsigned base_class = code[kBase] & 0x0f;
  const uint64_t base_size = little_endian(code.data() + kBase + 4, 4);
  MRMF_CHECK_KIND(Data, base_class == H5T_INTEGER && base_size == 1, where,
                  ": the string's character type is damaged (", base_size, "-byte characters of type class ",
                  base_class, " where libhdf5 writes 1-byte integers): is the file damaged?");
}

void check_vlen_string_heap(hid_t dataset, const std::string& where) {
  {
    H5TypeId type(MRMF_H5_CHECK(H5Dget_type(dataset)));
    H5SpaceId space(MRMF_H5_CHECK(H5Dget_space(dataset)));
    if (H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) <= 0 ||
        H5Sget_simple_extent_npoints(space.get()) != 1)
      return;  // not this check's: the reader says what is wrong
  }
  H5PlistId dcpl(MRMF_H5_CHECK(H5Dget_create_plist(dataset)));
  if (H5Pget_layout(dcpl.get()) != H5D_CONTIGUOUS) return;
  // Never written: no record to read. (libhdf5 1.10's H5Dget_offset then
  // returns HADDR_UNDEF plus the userblock's size, which wraps round to a
  // small number in a file with a userblock: not a test of allocation.)
  H5D_space_status_t status = H5D_SPACE_STATUS_ERROR;
  if (H5Dget_space_status(dataset, &status) < 0 || status != H5D_SPACE_STATUS_ALLOCATED) {
    H5Eclear2(H5E_DEFAULT);
    return;
  }
  const haddr_t value_at = H5Dget_offset(dataset);  // a file offset (the userblock included)
  if (value_at == HADDR_UNDEF) {
    H5Eclear2(H5E_DEFAULT);
    return;
  }
  // The file the dataset lives in -- another than the one opened when it is
  // reached through an external link -- for its layout and its bytes.
  const H5FileId file(MRMF_H5_CHECK(H5Iget_file_id(dataset)));
  const std::string path = h5_file_name(dataset);
  if (path.empty()) return;
  H5PlistId fcpl(MRMF_H5_CHECK(H5Fget_create_plist(file.get())));
  size_t sizeof_addr = 0, sizeof_size = 0;
  hsize_t base = 0;  // heap addresses count from the superblock, after a userblock
  MRMF_H5_CHECK(H5Pget_sizes(fcpl.get(), &sizeof_addr, &sizeof_size));
  MRMF_H5_CHECK(H5Pget_userblock(fcpl.get(), &base));
  if (sizeof_addr != 8 || sizeof_size != 8 || value_at < base) return;

  const RawFileBytes in(path, where);
  const std::string in_file = path == where.substr(0, path.size()) ? "" : " (in " + path + ", where it lies)";
  const uint64_t file_size = in.size();
  auto damaged = [&](const std::string& what) {
    MRMF_THROW(Data, where, in_file, ": the file's global heap, which holds the string's bytes, is damaged (", what,
               "): is the file damaged?");
  };

  // The dataset's value: the string's length, then the heap object's id
  // (the collection's address and the object's index).
  unsigned char id[16];
  if (!in.read(value_at, id, sizeof id)) damaged("the string's record lies past the end of the file");
  const uint64_t length = little_endian(id, 4), heap_addr = little_endian(id + 4, 8), index = little_endian(id + 12, 4);
  if (heap_addr == 0) return;  // a null string: libhdf5 reads no heap
  if (heap_addr > file_size || base > file_size - heap_addr)
    damaged("the collection's address lies past the end of the file");
  const uint64_t heap_at = base + heap_addr;

  unsigned char header[kHeapHeader];
  if (!in.read(heap_at, header, kHeapHeader) || std::memcmp(header, "GCOL", 4) != 0 || header[4] != 1)
    damaged("no version-1 collection at file offset " + std::to_string(heap_at));
  const uint64_t heap_size = little_endian(header + 8, 8);
  if (heap_size < kHeapHeader || heap_size > file_size - heap_at)
    damaged("a collection of " + std::to_string(heap_size) + " bytes at file offset " + std::to_string(heap_at) +
            " in a file of " + std::to_string(file_size));

  // libhdf5's walk (H5HG__cache_heap_deserialize), with its exits made
  // errors: an object that would not move the walk on, or would reach past
  // the collection.
  std::vector<unsigned char> heap(heap_size);
  if (!in.read(heap_at, heap.data(), heap_size)) damaged("the collection ends past the end of the file");
  uint64_t p = kHeapHeader, found_size = 0;
  bool found = false;
  while (p < heap_size) {
    if (heap_size - p < kObjectHeader) break;  // too small for a header: free space, as libhdf5 takes it
    const unsigned char* o = heap.data() + p;
    const uint64_t obj_index = little_endian(o, 2), obj_size = little_endian(o + 8, 8);
    const uint64_t room = heap_size - p;
    // Data padded to 8 bytes after the header; free space's size counts its header.
    const bool fits = obj_index == 0 ? obj_size <= room : obj_size <= room - kObjectHeader;
    const uint64_t need = obj_index == 0 ? obj_size : kObjectHeader + (obj_size + 7) / 8 * 8;
    if (!fits || need == 0 || need > room)
      damaged("object " + std::to_string(obj_index) + " at byte " + std::to_string(p) + " of the " +
              std::to_string(heap_size) + "-byte collection at file offset " + std::to_string(heap_at) + " claims " +
              std::to_string(obj_size) + " bytes");
    if (obj_index != 0 && obj_index == index) {
      found = true;
      found_size = obj_size;
    }
    p += need;
  }
  if (!found)
    damaged("the string's object " + std::to_string(index) + " is not in the collection at file offset " +
            std::to_string(heap_at));
  // libhdf5 copies the object's size into a buffer of the string's length.
  if (found_size != length)
    damaged("the string is " + std::to_string(length) + " bytes long, its heap object " + std::to_string(found_size));
}

}  // namespace mrmf::data
