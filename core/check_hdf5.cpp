#include "core/check_hdf5.h"

namespace mrmf::detail {
namespace {
constexpr const char* kDamaged = ": the file is damaged (";

herr_t collect_innermost(unsigned n, const H5E_error2_t* err, void* out) {
  auto* s = static_cast<std::string*>(out);
  if (n == 0 && err && err->desc) *s = err->desc;  // walking upward, n == 0 is the innermost frame
  return 0;
}
}  // namespace

std::string hdf5_error_text() {
  std::string text;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collect_innermost, &text);
  H5Eclear2(H5E_DEFAULT);
  // HDF5's words for a changed byte: a checksum that fails (files with
  // checksummed metadata), or no object header where an address points (a
  // damaged address or header, with or without checksums).
  if (text.find("checksum") != std::string::npos)
    text += std::string(kDamaged) + "its bytes no longer match the checksum written with them)";
  else if (text.find("bad object header version") != std::string::npos)
    text += std::string(kDamaged) + "no valid object header where the file records one)";
  return text.empty() ? std::string("HDF5 call failed") : text;
}

bool hdf5_reports_damage(const std::string& text) { return text.find(kDamaged) != std::string::npos; }
}  // namespace mrmf::detail
