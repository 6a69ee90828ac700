#include "data/shuffle.h"

#include <cstddef>
#include <utility>

#include "kernels/philox.h"

namespace mrmf::data {

uint64_t philox_bits64(uint64_t seed, uint64_t stream, uint64_t counter) {
  const kernels::Philox4x32 r = kernels::philox4x32_10(
      static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), static_cast<uint32_t>(stream),
      static_cast<uint32_t>(stream >> 32), static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  return (static_cast<uint64_t>(r.v[0]) << 32) | r.v[1];
}

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch, int rank) {
  std::vector<int64_t> p(static_cast<size_t>(n > 0 ? n : 0));
  for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = i;
  // Stream id: epoch in the high half, rank in the low half (distinct for any
  // realistic run); a tag keeps it apart from other Philox users of the seed.
  const uint64_t stream = (static_cast<uint64_t>(epoch) << 32) ^ static_cast<uint32_t>(rank) ^ 0x5348554646ull;
  uint64_t counter = 0;
  for (int64_t i = n - 1; i > 0; --i) {
    // Unbiased draw in [0, i]: reject the top partial range of 2^64.
    const uint64_t bound = static_cast<uint64_t>(i) + 1;
    const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t r;
    do {
      r = philox_bits64(seed, stream, counter++);
    } while (r >= limit);
    std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(r % bound)]);
  }
  return p;
}

}  // namespace mrmf::data
