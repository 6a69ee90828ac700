// Where libhdf5 looks for a file that another file names: the target of an
// external link, a virtual dataset's source, an external raw-data file.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace mrmf::data {

// The absolute folder of `file`.
std::filesystem::path folder_of(const std::string& file);

// Where HDF5 may look for a file named `name` from a file in `origin`: the
// prefixes of `prefix_env` (':'-separated, "${ORIGIN}" = origin), the
// folder of the file that names it, and the name itself (relative to the
// current folder). An absolute name is tried as is, then by its last part.
// (HDF5's own order differs a little by mechanism and version; for
// external links, libhdf5 1.10 opens the first of these that opens.)
std::vector<std::filesystem::path> search_candidates(const std::string& name, const std::filesystem::path& origin,
                                                     const char* prefix_env);

}  // namespace mrmf::data
