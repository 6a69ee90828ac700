// The input lines the fused downsample's CPU rows prefetch while derived
// levels sum (FusedDownsample::plane_stretch, used by row_cpu): plane t of a
// call's slab, or at t == block[0] the first plane of the next call. The
// outputs do not depend on these lines (a prefetch never changes a value),
// so the kernel tests cannot see a wrong plane, offset or length; this test
// does: over all calls, the stretches must tile the input exactly once.
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "kernels/fused_downsample.h"
#include "kernels/fused_downsample_ops.h"

using namespace mrmf;
using namespace mrmf::kernels;

namespace {

using Kernel = FusedDownsample<RawType::U16, FusedTransform::None>;

// How many times each input element lies in a stretch, over call 0's first
// plane and, for every call, the planes t = 1 .. block[0] that follow it.
std::vector<int> stretch_count(const Shape& shape, const FusedDownsampleSpec& spec, int64_t group1) {
  FusedGeom g = make_fused_geom(shape, spec, "test");
  // The CPU's geometry: whole rows per call, slabs of group1 blocks along
  // axis 1 (fused_downsample_ops.inl sizes them by bytes).
  g.chunk = g.nblk[2];
  g.group1 = group1;
  g.finalize();
  std::vector<uint16_t> x(static_cast<size_t>(shape.numel()));
  const Kernel k{x.data(), {}, g};
  std::vector<int> count(x.size(), 0);
  const char* const base = reinterpret_cast<const char*>(x.data());
  const auto mark = [&](int64_t i, int64_t t) {
    Kernel::InputLead lead;
    k.plane_stretch(i, t, lead);
    if (lead.p == nullptr) return;
    REQUIRE(lead.p >= base);
    REQUIRE(lead.end <= base + x.size() * sizeof(uint16_t));
    REQUIRE(lead.p < lead.end);
    for (const char* p = lead.p; p < lead.end; p += sizeof(uint16_t))
      ++count[static_cast<size_t>((p - base) / static_cast<int64_t>(sizeof(uint16_t)))];
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
      {"three levels, channels-last", {2, 8, 12, 8, 4}, InputLayout::ChannelsLast, {{1, 1, 1}, {2, 2, 2}, {4, 4, 4}}, 2},
      {"the CosmoFlow ladder", {2, 6, 8, 10, 4}, InputLayout::ChannelsLast, {{2, 1, 1}, {2, 2, 2}}, 3},
      {"1/1 alone (blocks of one plane)", {3, 4, 5, 6, 4}, InputLayout::ChannelsLast, {{1, 1, 1}}, 2},
      {"one channel first", {3, 1, 8, 8, 8}, InputLayout::ChannelsFirst, {{1, 1, 1}, {2, 2, 2}}, 3},
      {"a series, three channels last", {2, 16, 3}, InputLayout::ChannelsLast, {{2}, {4}}, 1},
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
