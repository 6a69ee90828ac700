// libhdf5 opens the file behind an external link itself, on the way to an
// object through it. The metadata walk H5File::open_read runs before
// libhdf5 opens a file (h5_symbol_table_check.h) never saw that one: the
// review of session 63 damaged the target of a link byte by byte and, read
// through the link, found 2 crashes inside libhdf5, 2 reads that did not
// end and 204 silently wrong ones -- none of them when the target was
// opened directly. A lookup made with this link access list walks each
// link's target first and fails where the walk refuses it.
#pragma once

#include <hdf5.h>

#include <exception>
#include <string>
#include <unordered_set>

#include "data/h5file.h"

namespace mrmf::data {

class WalkedLinkAccess {
 public:
  // `walked`: the targets already walked (absolute paths), skipped; those
  // this one walks are added. It must outlive this list.
  explicit WalkedLinkAccess(std::unordered_set<std::string>& walked);
  WalkedLinkAccess(const WalkedLinkAccess&) = delete;  // libhdf5 holds its address
  WalkedLinkAccess& operator=(const WalkedLinkAccess&) = delete;

  hid_t get() const { return lapl_.get(); }
  // After a libhdf5 call with this list failed: throws the walk's error
  // where it refused a link's target; returns otherwise.
  void rethrow_refusal() const;

 private:
  static herr_t before_open(const char* parent_file, const char* parent_group, const char* child_file,
                            const char* child_object, unsigned* flags, hid_t fapl, void* self) noexcept;

  H5PlistId lapl_;
  std::unordered_set<std::string>& walked_;
  std::exception_ptr refusal_;
};

}  // namespace mrmf::data
