// The CPU traversal of the fused downsample functor (kernels/fused_downsample.h,
// whose per-position math the GPU runs): host only, g.chunk = whole rows.
// One call is a slab of coarse blocks; its levels advance together plane by
// plane along axis 0 (row_cpu()): levels read from the input run the
// segment rows of kernels/fused_downsample_segments.h (direct_rows_cpu),
// derived levels sum the rows of the level they average (derived_rows_cpu),
// prefetching the next input plane meanwhile (InputLead), and levels whose
// outputs would overflow the accumulator run the functor's per-position
// loops after a block's last plane (plain_level()). FusedRowsCpu derives
// from FusedSegmentsCpu, which derives from the functor.
#pragma once

#if defined(__CUDACC__)
#error "kernels/fused_downsample_rows.h is the CPU traversal; device code includes kernels/fused_downsample.h"
#endif

#include "core/prefetch.h"
#include "kernels/fused_downsample_segments.h"

namespace mrmf::kernels {

template <RawType R, FusedTransform TF>
struct FusedRowsCpu : FusedSegmentsCpu<R, TF> {
  using Base = FusedDownsample<R, TF>;
  using Segments = FusedSegmentsCpu<R, TF>;
  // Members of the (dependent) bases, named here for unqualified lookup.
  using Base::derived_outputs;
  using Base::g;
  using Base::level_outputs;
  using Base::o;
  using Base::x;
  using Segments::direct_rows_cpu;
  using Segments::kAcc;
  using typename Base::T;

  explicit FusedRowsCpu(const Base& k) : Segments(k) {}

  // derived_outputs() over whole rows: per output row and segment, the
  // q0 x q1 source rows summed into acc (unit stride, in (a, b) order from
  // the first; up to four rows per pass over acc), then each output the sum
  // from 0 of its q2 neighbours, scaled.
  template <int kQ2>
  static void derived_seg(float* acc, const float* src, int64_t rowstep0, int64_t rowstep1, int64_t q0, int64_t q1,
                          int64_t q2_rt, int64_t wn, float* y, float inv) {
    const int64_t q2 = kQ2 > 0 ? kQ2 : q2_rt, len = wn * q2, rows = q0 * q1;
    const auto row = [&](int64_t k) { return src + (k / q1) * rowstep0 + (k % q1) * rowstep1; };
    int64_t k = 0;
    if (rows >= 4) {
      const float *r0 = row(0), *r1 = row(1), *r2 = row(2), *r3 = row(3);
      for (int64_t j = 0; j < len; ++j) acc[j] = r0[j] + r1[j] + r2[j] + r3[j];
      k = 4;
    } else if (rows >= 2) {
      const float *r0 = row(0), *r1 = row(1);
      for (int64_t j = 0; j < len; ++j) acc[j] = r0[j] + r1[j];
      k = 2;
    } else {
      const float* r0 = row(0);
      for (int64_t j = 0; j < len; ++j) acc[j] = r0[j];
      k = 1;
    }
    for (; k < rows; ++k) {
      const float* const rk = row(k);
      for (int64_t j = 0; j < len; ++j) acc[j] += rk[j];
    }
    for (int64_t w = 0; w < wn; ++w) {
      float s = 0.f;
      for (int64_t z = 0; z < q2; ++z) s += acc[w * q2 + z];
      y[w] = s * inv;
    }
  }

  // The input lines the next direct rows will read, `per_row` of them
  // prefetched before each derived output row (see row_cpu()): the lines
  // that hold [base, base + bytes), from the one holding base (which may
  // start before base, and before the input: integer addresses, not
  // pointers stepped outside it).
  struct InputLead {
    const char* base = nullptr;
    int64_t bytes = 0, done = 0, per_row = 0;  // done: lines issued
    uintptr_t first_line() const { return reinterpret_cast<uintptr_t>(base) & ~uintptr_t(63); }
    int64_t lines() const {
      return bytes > 0 ? static_cast<int64_t>((reinterpret_cast<uintptr_t>(base) + bytes - 1 - first_line()) / 64) + 1
                       : 0;
    }
    // At most this many lines per derived row: a stretch far longer than
    // its derived rows (a 1-D series: the whole next sample for C derived
    // rows) would otherwise go out as a burst, which was measured as
    // harmful (kPrefetchBytes, kernels/fused_downsample_segments.h) and
    // which evicts the rows being summed.
    static constexpr int64_t kMaxLinesPerRow = 16;
    int64_t total = 0;  // lines(), set by spread_over() after plane_stretch() set base and bytes
    void spread_over(int64_t rows) {
      total = lines();
      per_row = rows > 0 ? (total + rows - 1) / rows : 0;
      if (per_row > kMaxLinesPerRow) per_row = kMaxLinesPerRow;
    }
    MRMF_INLINE void step() {
      for (int64_t k = 0; k < per_row && done < total; ++k, ++done)
        prefetch_line(reinterpret_cast<const char*>(first_line() + 64 * static_cast<uintptr_t>(done)));
    }
  };

  // Rows u0 in [ua, ub) of level l's outputs in coarse block (n, p0, p1).
  void derived_rows_cpu(float* acc, int l, int64_t n, int64_t p0, int64_t p1, int64_t ua, int64_t ub,
                        InputLead& lead) const {
    const int m = g.src[l];
    const int64_t q0 = g.r[l][0], q1 = g.r[l][1], q2 = g.r[l][2];
    const int64_t r0 = g.per[l][0], r1 = g.per[l][1];
    const int64_t O0 = g.out[l][0], O1 = g.out[l][1], O2 = g.out[l][2];
    const int64_t M0 = g.out[m][0], M1 = g.out[m][1], M2 = g.out[m][2];
    const int64_t seg = kAcc / q2;  // outputs per segment
    for (int64_t u0 = ua; u0 < ub; ++u0)
      for (int64_t u1 = 0; u1 < r1; ++u1) {
        const int64_t o0 = p0 * r0 + u0, o1 = p1 * r1 + u1;
        for (int64_t c = 0; c < g.c; ++c) {
          float* const yrow = o.y[l] + (((n * g.c + c) * O0 + o0) * O1 + o1) * O2;
          const float* const src = o.y[m] + (((n * g.c + c) * M0 + o0 * q0) * M1 + o1 * q1) * M2;
          // The row this channel writes next, fetched while this one is
          // summed: a derived level's work between its stores is short (a
          // few cached loads per output), and each store to a line not yet
          // in cache held the rows behind it until the line came from
          // memory. In-process A/B on the 2-core Milan VM: the CosmoFlow
          // ladder and three levels 5-11 % less time
          // (bench/results/cpu_data_2026-11-29c.txt). At most its first
          // 1 KB: rows of whole planes (no level averages along axis 1) are
          // long streams, which the hardware prefetcher follows.
          prefetch_bytes(yrow + O2, static_cast<size_t>(O2 < 256 ? O2 : 256) * sizeof(float));
          lead.step();
          for (int64_t w0 = 0; w0 < O2; w0 += seg) {
            const int64_t wn = w0 + seg < O2 ? seg : O2 - w0;
            const float* const s0 = src + w0 * q2;
            if (q2 == 1)
              derived_seg<1>(acc, s0, M1 * M2, M2, q0, q1, 1, wn, yrow + w0, g.inv_r[l]);
            else if (q2 == 2)
              derived_seg<2>(acc, s0, M1 * M2, M2, q0, q1, 2, wn, yrow + w0, g.inv_r[l]);
            else if (q2 == 4)
              derived_seg<4>(acc, s0, M1 * M2, M2, q0, q1, 4, wn, yrow + w0, g.inv_r[l]);
            else
              derived_seg<0>(acc, s0, M1 * M2, M2, q0, q1, q2, wn, yrow + w0, g.inv_r[l]);
          }
        }
      }
  }

  // CPU call i's coarse blocks: sample n, block p0 along axis 0, blocks
  // [p1a, p1b) along axis 1 (group j1 of group1 blocks). The CPU geometry
  // has whole rows per call (nchunk == 1, set_cpu_rows_geometry), so i has
  // no chunk index j2, unlike operator()'s.
  struct Slab {
    int64_t n, p0, p1a, p1b;
  };
  Slab slab_of(int64_t i) const {
    const int64_t j1 = i - g.nblk1_div(i) * g.ngrp1, q = g.nblk1_div(i);
    const int64_t p1a = j1 * g.group1;
    return {g.nblk0_div(q), q - g.nblk0_div(q) * g.nblk[0], p1a,
            p1a + g.group1 < g.nblk[1] ? p1a + g.group1 : g.nblk[1]};
  }

  // Input plane `t` of call i's slab (t == block[0]: plane 0 of call
  // i + 1, the next call of the thread's contiguous range except at its
  // end), as a byte range; empty where the slab's rows are not one stretch
  // (several channels first) or there is no next call. t in [1, block[0]];
  // i = -1 only with t == block[0] (call 0's first plane).
  void plane_stretch(int64_t i, int64_t t, InputLead& lead) const {
    if (t == g.block[0]) {
      ++i;
      t = 0;
    }
    const bool rows_contiguous = (g.interleaved() || g.c == 1) && g.s[1] == g.in[2] * g.s[2];
    if (i >= g.calls() || !rows_contiguous) return;
    const Slab b = slab_of(i);
    const T* const first = x + b.n * g.s_n + (b.p0 * g.block[0] + t) * g.s[0] + b.p1a * g.block[1] * g.s[1];
    lead.base = reinterpret_cast<const char*>(first);
    lead.bytes = (b.p1b - b.p1a) * g.block[1] * g.s[1] * static_cast<int64_t>(sizeof(T));
  }

  // One CPU call: the coarse blocks (n, p0, p1) for the p1 of group j1, as a
  // slab. A level with f1 = 1 streams each of its input planes' rows for the
  // whole group as one stretch (long contiguous reads, what the hardware
  // prefetcher needs; block by block they were 1 KB bursts from planes 128 KB
  // apart); the group is sized by kSlabBytes (set_cpu_rows_geometry,
  // fused_downsample_ops.cpp).
  // The levels advance together along axis 0: after each input plane of the
  // block, every level computes the output rows whose inputs (or source
  // level's rows) are now complete. A derived level thus reads back rows
  // written a plane or two before, while still in L2, instead of after the
  // whole slab. Each output's sums are the same in the same order; only the
  // order in which outputs are computed changes.
  // While derived levels sum (cached rows, no input read), the next input
  // plane's lines are prefetched a few per derived output row (InputLead):
  // otherwise the memory bus idles through those sums, and the next direct
  // rows start on cold lines. Spread evenly over the derived rows: the
  // same lines in the first half of them measured no better. Session 45,
  // Emerald Rapids VM, alternating A/B: 1/1 + 1/8 + 1/64 71-79 -> 76-81 %
  // of memcpy, medians 76 -> 79 (bench/results/cpu_data_2026-11-30d.txt);
  // the CosmoFlow ladder level in a run of its own (its derived 1/8 is
  // short next to two planes read at once).
  void row_cpu(int64_t i) const {
    const auto [n, p0, p1a, p1b] = slab_of(i);
    float acc[kAcc];
    int64_t done[kFusedMaxLevels] = {};  // output rows along axis 0 finished, per level
    bool plain[kFusedMaxLevels] = {};    // per position in g.order: plain_level()
    for (int k = 0; k < g.levels; ++k) plain[k] = plain_level(g.order[k]);
    for (int64_t t = 1; t <= g.block[0]; ++t) {
      // Each level's rows [ua, ub) along axis 0 that plane t completes.
      int64_t ua[kFusedMaxLevels] = {}, ub[kFusedMaxLevels] = {}, derived_rows = 0;
      for (int k = 0; k < g.levels; ++k) {
        const int l = g.order[k];
        const bool derived = g.src[l] >= 0;
        ua[k] = ub[k] = done[l];
        if (plain[k]) {
          if (t == g.block[0]) ub[k] = g.per[l][0];
        } else {
          const int64_t ready = derived ? done[g.src[l]] / g.r[l][0] : t / g.f[l][0];
          if (ready > ua[k]) ub[k] = ready;
          if (derived) derived_rows += (ub[k] - ua[k]) * (p1b - p1a) * g.per[l][1] * g.c;
        }
        done[l] = ub[k];
      }
      InputLead lead;
      if (derived_rows > 0) {
        plane_stretch(i, t, lead);
        lead.spread_over(derived_rows);
      }
      for (int k = 0; k < g.levels; ++k) {
        const int l = g.order[k];
        const int64_t* f = g.f[l];
        const int64_t r1 = g.per[l][1];
        if (ub[k] <= ua[k]) continue;
        if (plain[k]) {
          for (int64_t p1 = p1a; p1 < p1b; ++p1)
            g.src[l] >= 0 ? derived_outputs(l, n, p0, p1, 0, g.nblk[2]) : level_outputs(l, n, p0, p1, 0, g.nblk[2]);
        } else if (g.src[l] >= 0) {
          for (int64_t p1 = p1a; p1 < p1b; ++p1) derived_rows_cpu(acc, l, n, p0, p1, ua[k], ub[k], lead);
        } else if (f[1] == 1) {
          direct_rows_cpu(acc, l, n, p0, p1a * r1, (p1b - p1a) * r1, ua[k], ub[k]);
        } else {
          for (int64_t o1 = p1a * r1; o1 < p1b * r1; ++o1) direct_rows_cpu(acc, l, n, p0, o1, 1, ua[k], ub[k]);
        }
      }
    }
  }

  // The plain-loop fallbacks (one output's inputs overflow the accumulator)
  // run a whole block at once, after its last plane.
  bool plain_level(int l) const {
    return g.src[l] >= 0 ? g.r[l][2] > kAcc : (g.interleaved() ? g.c : 1) * g.f[l][2] > kAcc;
  }
};

}  // namespace mrmf::kernels
