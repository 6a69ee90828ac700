// Thin logging facade over spdlog: one line per message, rank-prefixed, and
// only rank 0 speaks at `info` unless MRMF_LOG_ALL_RANKS=1 (so 64 ranks do not
// print 64 copies of every epoch line).
#pragma once

#include <spdlog/spdlog.h>

namespace mrmf::log {

// Called once the rank is known; before that everything logs as rank 0.
void configure(int rank, int world_size);
// Sends every later log line to stderr: for commands whose stdout is a
// machine-readable document (--json), which a notice must not break.
void to_stderr();
bool is_root();

// While alive, this rank speaks at `info` iff `speak` (e.g. the root of a
// rank group that trains its own model, so that every group's progress is
// visible, not only world rank 0's).
class Speaker {
 public:
  explicit Speaker(bool speak);
  ~Speaker();
  Speaker(const Speaker&) = delete;
  Speaker& operator=(const Speaker&) = delete;

 private:
  int prev_;
};

template <class... Args>
void info(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  if (is_root()) spdlog::info(fmt, std::forward<Args>(args)...);
}
template <class... Args>
void info_all(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  spdlog::info(fmt, std::forward<Args>(args)...);
}
template <class... Args>
void warn(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  spdlog::warn(fmt, std::forward<Args>(args)...);
}
template <class... Args>
void debug(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  spdlog::debug(fmt, std::forward<Args>(args)...);
}
template <class... Args>
void error(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  spdlog::error(fmt, std::forward<Args>(args)...);
}

}  // namespace mrmf::log
