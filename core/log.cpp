#include "core/log.h"

#include <cstdlib>
#include <string>

namespace mrmf::log {
namespace {
int g_rank = 0;
bool g_all = false;
}  // namespace

void configure(int rank, int world_size) {
  g_rank = rank;
  const char* all = std::getenv("MRMF_LOG_ALL_RANKS");
  g_all = all && std::string(all) == "1";
  std::string pattern = world_size > 1 ? "[%H:%M:%S] [%^%l%$] [rank " + std::to_string(rank) + "] %v"
                                       : "[%H:%M:%S] [%^%l%$] %v";
  spdlog::set_pattern(pattern);
  if (const char* lvl = std::getenv("MRMF_LOG_LEVEL")) spdlog::set_level(spdlog::level::from_str(lvl));
}

bool is_root() { return g_all || g_rank == 0; }

}  // namespace mrmf::log
