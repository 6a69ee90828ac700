#include "data/cache_budget.h"

#include <unistd.h>

#include <cstdlib>
#include <initializer_list>
#include <mutex>

namespace mrmf::data {
namespace {
// Plain integers behind a mutex: trivially destructible, safe at static exit.
std::mutex g_mu;
int64_t g_budget = 0;  // 0: default_cache_budget()
int64_t g_used = 0;

int ranks_on_node() {
  for (const char* var : {"MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"})
    if (const char* v = std::getenv(var)) {
      const int n = std::atoi(v);  // Slurm may say "4(x2)": the leading number is this node's count
      if (n > 0) return n;
    }
  return 1;
}

int64_t budget_locked() { return g_budget > 0 ? g_budget : default_cache_budget(); }
}  // namespace

int64_t default_cache_budget() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  const int64_t phys = pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : int64_t(16) << 30;
  return phys / 4 / ranks_on_node();
}

void set_cache_budget(int64_t bytes) {
  std::lock_guard<std::mutex> l(g_mu);
  g_budget = bytes > 0 ? bytes : 0;
}

int64_t cache_budget() {
  std::lock_guard<std::mutex> l(g_mu);
  return budget_locked();
}

int64_t cache_in_use() {
  std::lock_guard<std::mutex> l(g_mu);
  return g_used;
}

bool reserve_cache(int64_t n) {
  std::lock_guard<std::mutex> l(g_mu);
  if (n < 0 || g_used + n > budget_locked()) return false;
  g_used += n;
  return true;
}

void release_cache(int64_t n) noexcept {
  std::lock_guard<std::mutex> l(g_mu);
  g_used -= n;
  if (g_used < 0) g_used = 0;
}

}  // namespace mrmf::data
