// One memory budget for the in-memory sample caches of every loader in the
// process (training and validation loaders, every MRMF stage's): each loader
// reserves its whole shard's cache up front, or streams every epoch when it
// does not fit what is left. Why one budget: a per-loader "fits in a quarter
// of RAM" check lets two loaders, or four ranks on one node, take all of it.
// Default: a quarter of the node's physical memory divided by the ranks the
// launcher placed on this node; `data.cache_max_mb` sets it explicitly.
#pragma once

#include <cstdint>

namespace mrmf::data {

// The default: physical memory / 4 / ranks on this node (MPICH's
// MPI_LOCALNRANKS, Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE, Slurm's
// SLURM_NTASKS_PER_NODE; 1 when none is set).
int64_t default_cache_budget();
// Sets the budget in bytes (0: the default). Reservations already made stay.
void set_cache_budget(int64_t bytes);
int64_t cache_budget();
int64_t cache_in_use();
// Reserves n bytes of the budget: true, or false (nothing reserved) when they
// do not fit what is left.
bool reserve_cache(int64_t n);
void release_cache(int64_t n) noexcept;

// A reservation released when it goes out of scope (a loader whose
// constructor throws after reserving gives its share back). Neither copied
// nor moved.
class CacheReservation {
 public:
  CacheReservation() = default;
  ~CacheReservation() { release_cache(bytes_); }
  CacheReservation(const CacheReservation&) = delete;
  CacheReservation& operator=(const CacheReservation&) = delete;
  // Reserves n bytes in addition to what this object holds; false (nothing
  // reserved) when they do not fit.
  bool reserve(int64_t n) {
    if (!reserve_cache(n)) return false;
    bytes_ += n;
    return true;
  }

 private:
  int64_t bytes_ = 0;
};

}  // namespace mrmf::data
