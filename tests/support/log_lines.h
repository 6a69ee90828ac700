// The lines the default logger writes at info and above while a LogLines
// is alive, for tests that assert what a user is told (a notice, its
// advice) and how often. The logger's level is at most info meanwhile
// (MRMF_LOG_LEVEL may have raised it), and restored after. Create and
// destroy it while no other thread logs: spdlog's sink list is not guarded
// against changes during logging (a loader created after it and destroyed
// before it has joined its threads and waited for its jobs).
#pragma once

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

namespace mrmf::test {

class LogLines {
 public:
  LogLines()
      : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1024)), level_(spdlog::default_logger()->level()) {
    sink_->set_level(spdlog::level::info);
    spdlog::default_logger()->sinks().push_back(sink_);
    if (level_ > spdlog::level::info) spdlog::default_logger()->set_level(spdlog::level::info);
  }
  ~LogLines() {
    spdlog::default_logger()->set_level(level_);
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  LogLines(const LogLines&) = delete;
  LogLines& operator=(const LogLines&) = delete;

  std::vector<std::string> lines() const { return sink_->last_formatted(); }
  // How many lines contain `text`.
  int count(const std::string& text) const {
    const auto all = lines();
    return static_cast<int>(
        std::count_if(all.begin(), all.end(), [&](const std::string& l) { return l.find(text) != std::string::npos; }));
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  spdlog::level::level_enum level_;
};

}  // namespace mrmf::test
