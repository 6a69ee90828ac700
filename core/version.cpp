#include "core/version.h"

#include "mrmf/build_info.h"  // generated in the build tree (cmake/write_build_info.cmake)

namespace mrmf {

const std::string& build_commit() {
  static const std::string commit = MRMF_BUILD_COMMIT;
  return commit;
}

const std::string& build_version() {
  static const std::string version = std::string(MRMF_BUILD_VERSION) + " (git " + build_commit() + ")";
  return version;
}

}  // namespace mrmf
