// The sections of bench_data (bench/bench_data.cpp) kept in files of their own,
// and the timing helpers they share with it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "bench/common/timing.h"  // best_time, par_memcpy
#include "core/stream.h"

namespace mrmf::bench {

double secs(std::chrono::steady_clock::time_point a);
double best_of(int reps, const std::function<void()>& fn);  // best_time() on the CPU stream: wall-clock seconds

// Runs a and b alternately `reps` times after one warm-up each; returns the
// median times of a and b and the median of the per-pair ratios t_b / t_a.
struct Paired {
  double a, b, ratio;
  double a_best, b_best;  // fastest of each: the code's own cost with the least interference
};
Paired paired(int reps, const std::function<void()>& a, const std::function<void()>& b);

// A line of the results table: printed, and kept for --out (table()).
void row(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
const std::string& table();

// A count-like value for element i: geometric with mean 8, like CosmoFlow's
// particle counts (small integers: log1p's table lookups stay on a few
// lines, and the AVX-512 rows take their in-register path).
uint16_t geometric_count(int64_t i);

// (b): the fused downsample kernel against a memcpy of the same bytes.
struct KernelRowsArgs {
  int batch = 8, side = 128;                       // [batch, side^3, 4] uint16 inputs
  std::function<bool(const std::string&)> wanted;  // --case
  std::string ab_var, ab_a, ab_b;                  // --ab-env VAR=A,B (empty: the usual rows)
};
void kernel_rows(const KernelRowsArgs& a);

}  // namespace mrmf::bench
