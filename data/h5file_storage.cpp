// Whether a dataset's values are all stored (H5File::unstored_part), and
// which other files a file's datasets read (H5File::files_behind).
//
// Why: HDF5 hands back its fill value (zeros) for storage that does not
// exist -- a dataset created and never written, chunks a writer died before
// writing, a virtual dataset whose source file is missing, an external raw
// file shorter than the dataset -- without an error. Such files trained and
// evaluated on zeros. And an output named like a file that an input reaches
// through an external link was replaced by --force.
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <set>

#include "data/h5_link_access.h"
#include "data/h5_search_paths.h"
#include "data/h5file.h"

namespace fs = std::filesystem;

namespace mrmf::data {

namespace {

// One name of a string HDF5 returns through (buffer, size) calls.
template <typename Get>
std::string h5_string(Get get) {
  const ssize_t n = get(nullptr, 0);
  if (n < 0) {
    H5Eclear2(H5E_DEFAULT);
    return {};
  }
  std::string s(static_cast<size_t>(n) + 1, '\0');
  if (get(s.data(), s.size()) < 0) {
    H5Eclear2(H5E_DEFAULT);
    return {};
  }
  s.resize(static_cast<size_t>(n));
  return s;
}

}  // namespace

fs::path folder_of(const std::string& file) {
  std::error_code ec;
  return fs::absolute(file, ec).parent_path();
}

std::vector<fs::path> search_candidates(const std::string& name, const fs::path& origin, const char* prefix_env) {
  std::vector<fs::path> out;
  const fs::path n(name);
  if (n.is_absolute()) out.push_back(n);
  const fs::path rel = n.is_absolute() ? n.filename() : n;
  if (const char* env = prefix_env ? std::getenv(prefix_env) : nullptr) {
    std::string list = env;
    for (size_t b = 0; b <= list.size();) {
      size_t e = list.find(':', b);
      if (e == std::string::npos) e = list.size();
      std::string p = list.substr(b, e - b);
      if (const size_t o = p.find("${ORIGIN}"); o != std::string::npos) p.replace(o, 9, origin.string());
      if (!p.empty()) out.push_back(fs::path(p) / rel);
      b = e + 1;
    }
  }
  out.push_back(origin / rel);
  if (!n.is_absolute()) out.push_back(n);
  return out;
}

namespace {

std::optional<fs::path> first_existing(const std::vector<fs::path>& paths) {
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::exists(p, ec)) return fs::absolute(p, ec);
  }
  return std::nullopt;
}

std::string listed(const std::vector<fs::path>& paths) {
  std::string s;
  for (const auto& p : paths) s += (s.empty() ? "" : ", ") + p.string();
  return s;
}

constexpr int kMaxDepth = 4;  // virtual datasets of virtual datasets ...

std::optional<std::string> unstored(hid_t d, const std::string& file, int depth);

// A virtual dataset: every source file and dataset present and stored, and
// the mappings covering every element.
std::optional<std::string> unstored_virtual(hid_t dcpl, hssize_t npoints, const std::string& file, int depth) {
  size_t count = 0;
  if (H5Pget_virtual_count(dcpl, &count) < 0) {
    H5Eclear2(H5E_DEFAULT);
    return "its virtual mappings cannot be read";
  }
  hssize_t mapped = 0;
  bool bounded = true;
  for (size_t i = 0; i < count; ++i) {
    H5SpaceId vspace(H5Pget_virtual_vspace(dcpl, i));
    const hssize_t sel = vspace ? H5Sget_select_npoints(vspace.get()) : -1;
    if (sel < 0 || sel > npoints) {  // an unlimited selection: not counted
      H5Eclear2(H5E_DEFAULT);
      bounded = false;
    } else {
      mapped += sel;
    }
    const std::string src_file = h5_string([&](char* b, size_t n) { return H5Pget_virtual_filename(dcpl, i, b, n); });
    const std::string src_dset = h5_string([&](char* b, size_t n) { return H5Pget_virtual_dsetname(dcpl, i, b, n); });
    if (src_file.find('%') != std::string::npos || src_dset.find('%') != std::string::npos) continue;  // printf-named
    const std::string where =
        "its virtual mapping " + std::to_string(i) + " (dataset '" + src_dset + "' of '" + src_file + "')";
    std::string src_path = file;
    if (src_file != ".") {
      const auto places = search_candidates(src_file, folder_of(file), "HDF5_VDS_PREFIX");
      const auto found = first_existing(places);
      if (!found) return where + " names a file that does not exist (looked for " + listed(places) + ")";
      src_path = found->string();
    }
    std::optional<std::string> why;
    try {
      const H5File src = H5File::open_read(src_path);
      if (!src.exists(src_dset)) return where + ": " + src_path + " has no dataset '" + src_dset + "'";
      H5DatasetId sd(H5Dopen2(src.id(), src_dset.c_str(), H5P_DEFAULT));
      if (!sd) {
        H5Eclear2(H5E_DEFAULT);
        return where + ": cannot open it in " + src_path;
      }
      if (depth < kMaxDepth) why = unstored(sd.get(), src_path, depth + 1);
    } catch (const Error& e) {
      return where + ": " + e.message();
    }
    if (why) return where + ": " + *why;
  }
  if (bounded && mapped < npoints)
    return "its virtual mappings cover " + std::to_string(mapped) + " of its " + std::to_string(npoints) + " elements";
  return std::nullopt;
}

// External raw storage (h5py's external=): each segment's file present and
// long enough. HDF5 reads a missing tail as zeros.
std::optional<std::string> unstored_external(hid_t d, hid_t dcpl, int count, hssize_t npoints,
                                             const std::string& file) {
  H5TypeId type(H5Dget_type(d));
  if (!type) {
    H5Eclear2(H5E_DEFAULT);
    return std::nullopt;
  }
  uint64_t remaining = static_cast<uint64_t>(npoints) * H5Tget_size(type.get());
  for (int i = 0; i < count && remaining > 0; ++i) {
    char name[4096] = {};
    off_t offset = 0;
    hsize_t size = 0;
    if (H5Pget_external(dcpl, static_cast<unsigned>(i), sizeof name, name, &offset, &size) < 0) {
      H5Eclear2(H5E_DEFAULT);
      return "its external raw file " + std::to_string(i) + " cannot be read from the file";
    }
    const uint64_t take = size == H5F_UNLIMITED ? remaining : std::min<uint64_t>(size, remaining);
    remaining -= take;
    // HDF5 opens a relative name from the current folder, or under
    // $HDF5_EXTFILE_PREFIX ("${ORIGIN}": the HDF5 file's folder).
    fs::path p(name);
    const char* env = std::getenv("HDF5_EXTFILE_PREFIX");
    if (env && *env && !p.is_absolute()) {
      std::string pre = env;
      if (const size_t o = pre.find("${ORIGIN}"); o != std::string::npos) pre.replace(o, 9, folder_of(file).string());
      p = fs::path(pre) / p;
    }
    struct stat st {};
    const std::string seg = "its external raw file '" + std::string(name) + "'";
    if (::stat(p.c_str(), &st) != 0)
      return seg + " does not exist as " + fs::absolute(p).string() +
             " (HDF5 opens a relative raw file name from the current folder, or under $HDF5_EXTFILE_PREFIX, "
             "where ${ORIGIN} stands for the HDF5 file's folder)";
    const uint64_t need = static_cast<uint64_t>(offset) + take;
    if (static_cast<uint64_t>(st.st_size) < need)
      return seg + " (" + fs::absolute(p).string() + ") holds " + std::to_string(st.st_size) + " bytes, the dataset " +
             "needs " + std::to_string(need) + " (offset " + std::to_string(offset) + " + " + std::to_string(take) +
             "), as if truncated";
  }
  return std::nullopt;
}

std::optional<std::string> unstored(hid_t d, const std::string& file, int depth) {
  H5SpaceId space(H5Dget_space(d));
  H5PlistId dcpl(H5Dget_create_plist(d));
  if (!space || !dcpl) {
    H5Eclear2(H5E_DEFAULT);
    return std::nullopt;  // whatever failed fails again, named, where the dataset is read
  }
  const hssize_t npoints = H5Sget_simple_extent_npoints(space.get());
  if (npoints <= 0) return std::nullopt;
  switch (H5Pget_layout(dcpl.get())) {
    case H5D_VIRTUAL: return unstored_virtual(dcpl.get(), npoints, file, depth);
    case H5D_CONTIGUOUS: {
      const int n_ext = H5Pget_external_count(dcpl.get());
      if (n_ext > 0) return unstored_external(d, dcpl.get(), n_ext, npoints, file);
      H5D_space_status_t status = H5D_SPACE_STATUS_ERROR;
      if (H5Dget_space_status(d, &status) < 0) H5Eclear2(H5E_DEFAULT);
      if (status == H5D_SPACE_STATUS_NOT_ALLOCATED)
        return std::string("it was never written (HDF5 allocated no storage for it)");
      return std::nullopt;
    }
    case H5D_CHUNKED: {
      // H5Dget_space_status says "partly allocated" for any compressed or
      // edge chunk, so chunks are counted instead.
      const int rank = H5Sget_simple_extent_ndims(space.get());
      std::vector<hsize_t> dims(static_cast<size_t>(rank)), chunk(static_cast<size_t>(rank));
      if (H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0 ||
          H5Pget_chunk(dcpl.get(), rank, chunk.data()) != rank) {
        H5Eclear2(H5E_DEFAULT);
        return std::nullopt;
      }
      hsize_t expected = 1, stored = 0;
      for (int i = 0; i < rank; ++i) expected *= (dims[i] + chunk[i] - 1) / std::max<hsize_t>(chunk[i], 1);
      // (The dataset's own space, all selected: HDF5 1.10.8 fails H5S_ALL here.)
      if (H5Dget_num_chunks(d, space.get(), &stored) < 0) {
        H5Eclear2(H5E_DEFAULT);
        return std::nullopt;
      }
      if (stored >= expected) return std::nullopt;
      if (stored == 0) return std::string("it was never written (none of its chunks is stored)");
      return "only " + std::to_string(stored) + " of its " + std::to_string(expected) +
             " chunks were ever written (did the writer stop early?)";
    }
    default: return std::nullopt;  // compact: stored in the object header
  }
}

// Adds to `out` the files dataset `d` (in `file`) reads beside `file`.
void dataset_files(hid_t d, const std::string& file, std::set<std::string>& out) {
  H5PlistId dcpl(H5Dget_create_plist(d));
  if (!dcpl) {
    H5Eclear2(H5E_DEFAULT);
    return;
  }
  std::error_code ec;
  if (H5Pget_layout(dcpl.get()) == H5D_VIRTUAL) {
    size_t count = 0;
    if (H5Pget_virtual_count(dcpl.get(), &count) < 0) H5Eclear2(H5E_DEFAULT);
    for (size_t i = 0; i < count; ++i) {
      const std::string src =
          h5_string([&](char* b, size_t n) { return H5Pget_virtual_filename(dcpl.get(), i, b, n); });
      if (src.empty() || src == ".") continue;
      for (const auto& p : search_candidates(src, folder_of(file), "HDF5_VDS_PREFIX"))
        if (fs::exists(p, ec)) out.insert(fs::absolute(p, ec).string());
    }
  }
  const int n_ext = H5Pget_external_count(dcpl.get());
  for (int i = 0; i < n_ext; ++i) {
    char name[4096] = {};
    off_t offset = 0;
    hsize_t size = 0;
    if (H5Pget_external(dcpl.get(), static_cast<unsigned>(i), sizeof name, name, &offset, &size) < 0) {
      H5Eclear2(H5E_DEFAULT);
      continue;
    }
    for (const auto& p : search_candidates(name, folder_of(file), "HDF5_EXTFILE_PREFIX"))
      if (fs::exists(p, ec)) out.insert(fs::absolute(p, ec).string());
  }
}

struct Walk {
  const WalkedLinkAccess* links = nullptr;  // each external link's target walked before libhdf5 opens it
  std::set<std::string> files;
  int depth = 0;
  bool failed = false;  // an exception inside the walk: stopped, reported by files_behind
};

void walk_group(hid_t group, Walk& w);

herr_t visit_link(hid_t group, const char* name, const H5L_info_t* info, void* data) noexcept {
  auto& w = *static_cast<Walk*>(data);
  const hid_t obj = H5Oopen(group, name, w.links->get());  // follows soft and external links
  if (obj < 0) {
    H5Eclear2(H5E_DEFAULT);  // a dangling link: what reads it says so
    return 0;
  }
  try {  // no C++ exception may unwind through HDF5's C frames
    const std::string file = h5_file_name(obj);
    std::error_code ec;
    if (info->type == H5L_TYPE_EXTERNAL && !file.empty()) w.files.insert(fs::absolute(file, ec).string());
    const H5I_type_t kind = H5Iget_type(obj);
    if (kind == H5I_DATASET) dataset_files(obj, file, w.files);
    // H5Lvisit does not cross an external link: walk the group behind it.
    if (kind == H5I_GROUP && info->type == H5L_TYPE_EXTERNAL && w.depth < kMaxDepth) {
      ++w.depth;
      walk_group(obj, w);
      --w.depth;
    }
  } catch (...) {
    w.failed = true;
  }
  H5Oclose(obj);
  return w.failed ? -1 : 0;
}

void walk_group(hid_t group, Walk& w) {
  if (H5Lvisit(group, H5_INDEX_NAME, H5_ITER_NATIVE, visit_link, &w) < 0) H5Eclear2(H5E_DEFAULT);
}

}  // namespace

std::optional<std::string> H5File::unstored_part(const std::string& dataset) const {
  H5DatasetId d = open_dataset(dataset);
  // Names in a dataset reached through an external link resolve from the
  // file it lives in, not from this one.
  const std::string holder = h5_file_name(d.get());
  return unstored(d.get(), holder.empty() ? path_ : holder, 0);
}

std::vector<std::string> H5File::files_behind() const {
  MRMF_CHECK(file_, "H5File: file is not open");
  const WalkedLinkAccess links(walked_link_targets_);
  Walk w;
  w.links = &links;
  walk_group(file_.get(), w);
  links.rethrow_refusal();  // a damaged file behind a link
  MRMF_CHECK_KIND(Data, !w.failed, path_, ": cannot list the files its links and datasets read");
  std::error_code ec;
  w.files.erase(fs::absolute(path_, ec).string());
  return {w.files.begin(), w.files.end()};
}

std::vector<std::string> files_behind(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec) || H5Fis_hdf5(path.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    return {};
  }
  try {
    return H5File::open_read(path).files_behind();
  } catch (const Error&) {
    return {};  // unreadable: whatever reads it says so
  }
}

}  // namespace mrmf::data
