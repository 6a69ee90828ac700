// The input lines the fused downsample's CPU rows prefetch while derived
// levels sum (FusedRowsCpu::plane_stretch, used by row_cpu): plane t of a
// call's slab, or at t == block[0] the first plane of the next call. The
// outputs do not depend on these lines (a prefetch never changes a value),
// so the kernel tests cannot see a wrong plane, offset or length; this test
// does: over all calls, the stretches must tile the input exactly once.
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "kernels/fused_downsample_ops.h"
#include "kernels/fused_downsample_rows.h"

using namespace mrmf;
using namespace mrmf::kernels;

namespace {

using Kernel = FusedRowsCpu<RawType::U16, FusedTransform::None>;

// The CPU backend's geometry for `shape` (axis 1 merged into the last where
// no level averages along it, whole rows per call), with slabs of group1
// blocks along axis 1 where group1 > 0 (the backend sizes them by bytes,
// which for these small shapes gives even slabs).
FusedGeom cpu_geom(const Shape& shape, const FusedDownsampleSpec& spec, int64_t group1) {
  FusedGeom g = make_fused_geom(shape, spec, "test");
  set_cpu_rows_geometry(g, RawType::U16, 2);
  if (group1 > 0) g.group1 = group1;
  g.finalize();
  return g;
}

// How many times each input element lies in a stretch, over call 0's first
// plane and, for every call, the planes t = 1 .. block[0] that follow it.
std::vector<int> stretch_count(const Shape& shape, const FusedDownsampleSpec& spec, int64_t group1) {
  const FusedGeom g = cpu_geom(shape, spec, group1);
  std::vector<uint16_t> x(static_cast<size_t>(shape.numel()));
  const Kernel k{Kernel::Base{x.data(), {}, g}};
  std::vector<int> count(x.size(), 0);
  const char* const base = reinterpret_cast<const char*>(x.data());
  const auto mark = [&](int64_t i, int64_t t) {
    Kernel::InputLead lead;
    k.plane_stretch(i, t, lead);
    if (lead.base == nullptr) return;
    REQUIRE(lead.base >= base);
    REQUIRE(lead.bytes > 0);
    REQUIRE(lead.base + lead.bytes <= base + x.size() * sizeof(uint16_t));
    for (int64_t b = 0; b < lead.bytes; b += static_cast<int64_t>(sizeof(uint16_t)))
      ++count[static_cast<size_t>((lead.base + b - base) / static_cast<int64_t>(sizeof(uint16_t)))];
  };
  mark(-1, g.block[0]);  // "the call after call -1": call 0's first plane
  for (int64_t i = 0; i < g.calls(); ++i)
    for (int64_t t = 1; t <= g.block[0]; ++t) mark(i, t);
  return count;
}

int count_not_one(const std::vector<int>& count) {
  int bad = 0;
  for (const int c : count) bad += c != 1;
  return bad;
}

}  // namespace

TEST_CASE("fused downsample: the prefetched next planes tile the input exactly once", "[fused_downsample]") {
  struct Case {
    const char* name;
    Shape shape;
    InputLayout layout;
    std::vector<std::vector<int64_t>> levels;
    int64_t group1;
  };
  const std::vector<Case> cases = {
      // Blocks 4x4x4; 3 blocks along axis 1 in slabs of 2 and 1.
      {"three levels, channels-last",
       {2, 8, 12, 8, 4},
       InputLayout::ChannelsLast,
       {{1, 1, 1}, {2, 2, 2}, {4, 4, 4}},
       2},
      {"the CosmoFlow ladder", {2, 6, 8, 10, 4}, InputLayout::ChannelsLast, {{2, 1, 1}, {2, 2, 2}}, 3},
      {"1/1 alone (blocks of one plane)", {3, 4, 5, 6, 4}, InputLayout::ChannelsLast, {{1, 1, 1}}, 2},
      {"one channel first", {3, 1, 8, 8, 8}, InputLayout::ChannelsFirst, {{1, 1, 1}, {2, 2, 2}}, 3},
      {"a series, three channels last", {2, 16, 3}, InputLayout::ChannelsLast, {{2}, {4}}, 1},
      // No level averages along axis 1: the backend merges it into the last.
      {"1/1 + 1/2 along x, axis 1 merged", {2, 6, 4, 8, 4}, InputLayout::ChannelsLast, {{1, 1, 1}, {2, 1, 1}}, 0},
      {"three levels along x only, axis 1 merged",
       {1, 8, 3, 5, 4},
       InputLayout::ChannelsLast,
       {{1, 1, 1}, {2, 1, 1}, {4, 1, 1}},
       0},
      {"an image, 1/1 + 1/2 along H", {2, 8, 6, 3}, InputLayout::ChannelsLast, {{1, 1}, {2, 1}}, 0},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    FusedDownsampleSpec spec;
    spec.layout = c.layout;
    spec.levels = c.levels;
    const auto count = stretch_count(c.shape, spec, c.group1);
    CHECK(count_not_one(count) == 0);
  }
}

TEST_CASE("fused downsample: the prefetched next plane starts where that plane's rows start", "[fused_downsample]") {
  // [2, 8, 12, 8, 4] channels-last, blocks 4x4x4, slabs of 2 blocks along
  // axis 1: plane 1 of call 0 is one plane (s[0] elements) in; plane 0 of
  // call 1 (after call 0's last plane) is two blocks of rows along axis 1 in.
  FusedDownsampleSpec spec;
  spec.levels = {{1, 1, 1}, {2, 2, 2}, {4, 4, 4}};
  const FusedGeom g = cpu_geom(Shape{2, 8, 12, 8, 4}, spec, 2);
  REQUIRE(g.block[0] == 4);
  std::vector<uint16_t> x(static_cast<size_t>(2 * 8 * 12 * 8 * 4));
  const Kernel k{Kernel::Base{x.data(), {}, g}};
  const auto at = [&](int64_t elems) { return reinterpret_cast<const char*>(x.data() + elems); };
  Kernel::InputLead lead;
  k.plane_stretch(0, 1, lead);
  CHECK(lead.base == at(g.s[0]));
  CHECK(lead.bytes == 2 * 4 * g.s[1] * 2);
  k.plane_stretch(0, 4, lead);
  CHECK(lead.base == at(2 * 4 * g.s[1]));
  CHECK(lead.bytes == 1 * 4 * g.s[1] * 2);  // the last slab: one block of the three
  // The spread: every line of the stretch within the rows, at most
  // kMaxLinesPerRow per row.
  lead.spread_over(7);
  CHECK(lead.per_row * 7 * 64 >= lead.bytes);
  CHECK((lead.per_row - 1) * 7 * 64 < lead.bytes);
  // A stretch far longer than its rows (a series' next sample for its C
  // derived rows): capped, not one burst.
  Kernel::InputLead longer;
  longer.bytes = 64 * 100;
  longer.spread_over(3);
  CHECK(longer.per_row == Kernel::InputLead::kMaxLinesPerRow);
  longer.spread_over(0);
  CHECK(longer.per_row == 0);
  // Whole lines from the one holding base: 14 aligned lines over 7 rows
  // are 2 per row; shifted by 8 bytes they span 15 lines, 3 per row.
  alignas(64) static char buffer[16 * 64];
  Kernel::InputLead exact;
  exact.base = buffer;
  exact.bytes = 14 * 64;
  exact.spread_over(7);
  CHECK(exact.lines() == 14);
  CHECK(exact.per_row == 2);
  exact.base = buffer + 8;
  exact.spread_over(7);
  CHECK(exact.lines() == 15);
  CHECK(exact.per_row == 3);
  // step() issues each line once, per_row a row, and then nothing.
  for (int row = 0; row < 4; ++row) exact.step();
  CHECK(exact.done == 12);
  for (int row = 0; row < 6; ++row) exact.step();
  CHECK(exact.done == 15);
  // A lead never spread (no derived rows this plane) issues nothing.
  Kernel::InputLead unspread;
  unspread.base = buffer;
  unspread.bytes = 14 * 64;
  unspread.step();
  CHECK(unspread.done == 0);
}

TEST_CASE("fused downsample: no next-plane prefetch where a plane's rows are not one stretch",
          "[fused_downsample]") {
  // Several channels first: each channel's plane lies elsewhere, so
  // plane_stretch() leaves the lead empty rather than prefetch one channel.
  FusedDownsampleSpec spec;
  spec.layout = InputLayout::ChannelsFirst;
  spec.levels = {{1, 1, 1}, {2, 2, 2}};
  const auto count = stretch_count(Shape{2, 3, 4, 4, 4}, spec, 2);
  int covered = 0;
  for (const int c : count) covered += c;
  CHECK(covered == 0);
}
