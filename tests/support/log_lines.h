// The lines the default logger writes while a LogLines is alive, for tests
// that assert what a user is told (a notice, its advice) and how often.
// Create and destroy it while no other thread logs: spdlog's sink list is
// not guarded against changes during logging.
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
  LogLines() : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1024)) {
    spdlog::default_logger()->sinks().push_back(sink_);
  }
  ~LogLines() {
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
};

}  // namespace mrmf::test
