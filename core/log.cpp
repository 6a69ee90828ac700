#include "core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <string>

namespace mrmf::log {
namespace {
int g_rank = 0;
bool g_all = false;
int g_speak = -1;  // -1: rank 0 speaks; 0/1: a Speaker decides
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

void to_stderr() {
  static const bool done = [] {
    auto l = spdlog::stderr_color_mt("mrmf_stderr");
    l->set_level(spdlog::default_logger()->level());
    spdlog::set_default_logger(l);  // the registry's pattern applies to it
    return true;
  }();
  (void)done;
}

bool is_root() { return g_all || (g_speak < 0 ? g_rank == 0 : g_speak == 1); }

Speaker::Speaker(bool speak) : prev_(g_speak) { g_speak = speak ? 1 : 0; }
Speaker::~Speaker() { g_speak = prev_; }

}  // namespace mrmf::log
