#include "data/h5_link_access.h"

#include <filesystem>
#include <system_error>

#include "data/h5_search_paths.h"
#include "data/h5_symbol_table_check.h"

namespace fs = std::filesystem;

namespace mrmf::data {

WalkedLinkAccess::WalkedLinkAccess(std::unordered_set<std::string>& walked)
    // A dataset access list is a link access list too: H5Dopen2 takes it.
    : lapl_(MRMF_H5_CHECK(H5Pcreate(H5P_DATASET_ACCESS))), walked_(walked) {
  MRMF_H5_CHECK(H5Pset_elink_cb(lapl_.get(), &WalkedLinkAccess::before_open, this));
}

void WalkedLinkAccess::rethrow_refusal() const {
  if (refusal_) std::rethrow_exception(refusal_);
}

herr_t WalkedLinkAccess::before_open(const char* parent_file, const char*, const char* child_file, const char*,
                                     unsigned*, hid_t, void* self) noexcept {
  auto& access = *static_cast<WalkedLinkAccess*>(self);
  try {  // no C++ exception may unwind through libhdf5's C frames
    // The first place libhdf5 1.10 finds the file: the one it will open.
    for (const fs::path& p : search_candidates(child_file, folder_of(parent_file), "HDF5_EXT_PREFIX")) {
      std::error_code ec;
      if (!fs::is_regular_file(p, ec)) continue;
      const std::string target = fs::absolute(p, ec).string();
      if (access.walked_.count(target) == 0) {
        check_symbol_table_structure(target);
        access.walked_.insert(target);
      }
      return 0;
    }
    return 0;  // nowhere: libhdf5 says so
  } catch (...) {
    access.refusal_ = std::current_exception();
    return -1;
  }
}

}  // namespace mrmf::data
