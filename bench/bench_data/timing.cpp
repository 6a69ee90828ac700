// bench_data's timing helpers (bench/bench_data/sections.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <vector>

#include "bench/bench_data/sections.h"

namespace mrmf::bench {

using Clock = std::chrono::steady_clock;

double secs(Clock::time_point a) { return std::chrono::duration<double>(Clock::now() - a).count(); }

double best_of(int reps, const std::function<void()>& fn) { return best_time(cpu_stream(), reps, fn); }

Paired paired(int reps, const std::function<void()>& a, const std::function<void()>& b) {
  a();
  b();
  std::vector<double> ta, tb, r;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    a();
    ta.push_back(secs(t0));
    t0 = Clock::now();
    b();
    tb.push_back(secs(t0));
    r.push_back(tb.back() / ta.back());
  }
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return {median(ta), median(tb), median(r), *std::min_element(ta.begin(), ta.end()),
          *std::min_element(tb.begin(), tb.end())};
}

namespace {
std::string g_table;
}  // namespace

const std::string& table() { return g_table; }

void row(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::fputs(buf, stdout);
  g_table += buf;
}
uint16_t geometric_count(int64_t i) {
  const double keep = 8.0 / 9.0;  // P(count > k) = keep^k: mean keep / (1 - keep) = 8
  const uint64_t h = static_cast<uint64_t>(i) * 2654435761u;
  const double u = (static_cast<double>((h ^ (h >> 29)) * 0x9E3779B97F4A7C15ull >> 11) + 0.5) / 9007199254740992.0;
  return static_cast<uint16_t>(std::min(65535.0, std::floor(std::log(u) / std::log(keep))));
}

}  // namespace mrmf::bench
