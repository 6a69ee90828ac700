// CPU launcher: runs a functor over [0, n), one contiguous chunk per OpenMP thread.
// Small ranges run serially (thread start-up costs more than the work).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include <omp.h>

namespace mrmf::kernels::cpu {

constexpr int64_t kSerialBelow = 1 << 14;

// A functor over the rows of [N, C, inner]: it has a ChannelIndex `ci` and
// runs (or, as a reduction term, evaluates) at a flat element index of a known
// channel, `at(c, idx)` (kernels/batchnorm.h). The CPU walks such functors one
// contiguous row at a time: no per-element division, and the channel's
// constants stay in registers.
template <class T, class = void>
struct HasRows : std::false_type {};
template <class T>
struct HasRows<T, std::void_t<decltype(std::declval<const T&>().at(int64_t(0), int64_t(0))), decltype(T::ci)>>
    : std::true_type {};

// Elements [lo, hi) of a HasRows functor, row by row: one division for the
// first row, then the channel advances with the row. Flat [N, F] inputs
// (inner = 1) are walked along the channels instead, where element and
// channel advance together (as contiguous and vectorizable as a row).
template <class F>
void rows_of(const F& f, int64_t lo, int64_t hi) {
  const int64_t inner = f.ci.inner, channels = f.ci.channels;
  if (lo >= hi) return;
  if (inner == 1) {
    for (int64_t i = lo, c = lo % channels; i < hi; c = 0) {
      const int64_t stop = i + (channels - c) < hi ? i + (channels - c) : hi;
      for (; i < stop; ++i, ++c) f.at(c, i);
    }
    return;
  }
  int64_t r = lo / inner, c = r % channels, end = (r + 1) * inner;
  for (int64_t i = lo; i < hi; end += inner) {
    const int64_t stop = end < hi ? end : hi;
    for (; i < stop; ++i) f.at(c, i);
    if (++c == channels) c = 0;
  }
}

// Elements [lo, hi) of any functor: by rows where it has them.
template <class F>
void run_range(const F& f, int64_t lo, int64_t hi) {
  if constexpr (HasRows<F>::value)
    rows_of(f, lo, hi);
  else
    for (int64_t i = lo; i < hi; ++i) f(i);
}

// Each thread runs a private copy of the functor: with the shared original,
// a store through one of its float pointers might alias its own float
// members (a slope, a scale), which forces reloads and blocks vectorization;
// a local copy whose address never escapes is split into registers.
template <class F>
void launch(void* /*stream*/, int64_t n, const F& f) {
  if (n < kSerialBelow) {
    const F local = f;
    run_range(local, 0, n);
    return;
  }
  // Each thread takes one contiguous chunk (what schedule(static) does), but
  // as a plain counted loop: GCC does not vectorize the body of an
  // `omp for` loop here (checked with -fopt-info-vec), while this form
  // vectorizes exactly like the serial loop above. Chunk edges are multiples
  // of 16 elements so no two threads share a cache line of a float output.
#pragma omp parallel
  {
    const F local = f;
    const int64_t nt = omp_get_num_threads(), id = omp_get_thread_num();
    const int64_t per = (n + nt - 1) / nt;
    const int64_t chunk = (per + 15) / 16 * 16;
    const int64_t lo = id * chunk < n ? id * chunk : n;
    const int64_t hi = lo + chunk < n ? lo + chunk : n;
    run_range(local, lo, hi);
  }
}

}  // namespace mrmf::kernels::cpu

#include <vector>

namespace mrmf::kernels::cpu {

// Deterministic segmented sum: out[s] = sum_{j<m} term(s, j) for s in [0, S).
// The summation order depends only on (S, m) -- never on the thread count:
// each segment is cut into fixed 4096-element chunks summed in double, and the
// chunk partials are added in index order.
//
// Terms over rows (HasRows) are walked one contiguous row of a channel at a
// time, into kLanes interleaved partial sums (element j0 + p of a chunk into
// lane p mod kLanes, lanes added pairwise at the end): the per-element index
// arithmetic of term(s, j) and its single dependency chain had made the
// batch-norm statistics a fifth of a CosmoFlow training step on the CPU.
template <class Term>
void segmented_sum(void* /*stream*/, int64_t S, int64_t m, const Term& term, float* out) {
  constexpr int64_t kChunk = 4096, kLanes = 8;
  const int64_t chunks = (m + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<size_t>(S * (chunks > 0 ? chunks : 1)), 0.0);
  const int64_t work = S * chunks;
#pragma omp parallel if (S * m >= kSerialBelow)
  {
    const Term local = term;  // a private copy, as in launch()
#pragma omp for schedule(static)
    for (int64_t w = 0; w < work; ++w) {
      const int64_t s = w / chunks, j0 = (w % chunks) * kChunk;
      const int64_t j1 = j0 + kChunk < m ? j0 + kChunk : m;
      if constexpr (HasRows<Term>::value) {
        const int64_t inner = local.ci.inner, channels = local.ci.channels;
        double lane[kLanes] = {};
        const int64_t len = j1 - j0;
        int64_t n = j0 / inner, k = j0 - n * inner;  // element j0 + p of the chunk is (n, k) of its row
        for (int64_t p = 0; p < len; ++n, k = 0) {
          const int64_t end = p + (inner - k < len - p ? inner - k : len - p);
          const int64_t base = (n * channels + s) * inner + k - p;  // chunk position p is element base + p
          for (; p < end && p % kLanes; ++p) lane[p % kLanes] += static_cast<double>(local.at(s, base + p));
          for (; p + kLanes <= end; p += kLanes)
            for (int64_t u = 0; u < kLanes; ++u) lane[u] += static_cast<double>(local.at(s, base + p + u));
          for (; p < end; ++p) lane[p % kLanes] += static_cast<double>(local.at(s, base + p));
        }
        partial[static_cast<size_t>(w)] =
            ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
      } else {
        double acc = 0.0;
        for (int64_t j = j0; j < j1; ++j) acc += static_cast<double>(local(s, j));
        partial[static_cast<size_t>(w)] = acc;
      }
    }
  }
  for (int64_t s = 0; s < S; ++s) {
    double acc = 0.0;
    for (int64_t c = 0; c < chunks; ++c) acc += partial[static_cast<size_t>(s * chunks + c)];
    out[s] = static_cast<float>(acc);
  }
}

}  // namespace mrmf::kernels::cpu
