// FNV-1a, 64 bits: the fingerprints ranks compare (check_same_on_all_ranks)
// and configuration hashes. Not cryptographic; stable across builds.
#pragma once

#include <cstdint>
#include <string_view>

namespace mrmf {

inline uint64_t fnv1a64(std::string_view text, uint64_t h = 1469598103934665603ull) {
  for (unsigned char ch : text) h = (h ^ ch) * 1099511628211ull;
  return h;
}

}  // namespace mrmf
