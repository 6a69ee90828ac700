// Deterministic per-epoch sample orders.
//
// Why not std::shuffle / std::uniform_int_distribution: their algorithms are
// implementation-defined, so the same seed gives different orders with
// libstdc++ and libc++ (and could change between versions) -- a resumed or
// re-run training would see other batches. Here the random integers come from
// Philox4x32-10 keyed by the seed, with (epoch, rank) as the stream, and a
// plain Fisher-Yates with unbiased bounded draws (rejection) uses them: the
// order is a pure function of (n, seed, epoch, rank).
#pragma once

#include <cstdint>
#include <vector>

namespace mrmf::data {

// 64 random bits number `counter` of stream (seed, stream).
uint64_t philox_bits64(uint64_t seed, uint64_t stream, uint64_t counter);

// A uniformly random permutation of [0, n).
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch, int rank);

}  // namespace mrmf::data
