// Loaders: coverage and sharding, deterministic per-epoch order, resume
// mid-epoch, prefetch == synchronous, cache == uncached, values through the
// fused reduction, the threads that make a batch. What the loaders read and
// refuse (file layouts, bad input): test_loader_input.cpp; mapped files:
// test_loader_mapped.cpp.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

#include "core/error.h"
#include "data/cache_budget.h"
#include "data/formats.h"
#include "data/h5file.h"
#include "data/loader.h"
#include "data/prefetch.h"
#include "data/shuffle.h"
#include "kernels/fused_downsample_ops.h"
#include "kernels/philox.h"
#include "support/loader_fixtures.h"
#include "support/temp_dir.h"

using namespace mrmf;
using namespace mrmf::data;
namespace fs = std::filesystem;

using namespace mrmf::test::loader;

TEST_CASE("shuffle: Fisher-Yates over Philox is a deterministic permutation", "[loader]") {
  const auto a = epoch_permutation(1000, 7, 3, 1), b = epoch_permutation(1000, 7, 3, 1);
  REQUIRE(a == b);
  REQUIRE(a != epoch_permutation(1000, 7, 4, 1));
  REQUIRE(a != epoch_permutation(1000, 7, 3, 0));
  std::vector<int64_t> s = a;
  std::sort(s.begin(), s.end());
  for (int64_t i = 0; i < 1000; ++i) REQUIRE(s[static_cast<size_t>(i)] == i);
  // The algorithm is pinned (any change of the order breaks resumed runs):
  // the documented one, written out here on the Philox block function
  // (known-answer tested in test_elementwise.cpp) -- Fisher-Yates from the
  // top, 64-bit draws (words 0 and 1 of block `counter` of stream
  // (epoch << 32) ^ rank ^ "SHUFF"), the top partial range of 2^64 rejected.
  const auto reference = [](int64_t n, uint64_t seed, int64_t epoch, int rank) {
    std::vector<int64_t> p(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = i;
    const uint64_t stream = (static_cast<uint64_t>(epoch) << 32) ^ static_cast<uint32_t>(rank) ^ 0x5348554646ull;
    uint64_t counter = 0;
    for (int64_t i = n - 1; i > 0; --i) {
      const uint64_t bound = static_cast<uint64_t>(i) + 1;
      uint64_t r;
      do {
        const auto b = kernels::philox4x32_10(uint32_t(counter), uint32_t(counter >> 32), uint32_t(stream),
                                              uint32_t(stream >> 32), uint32_t(seed), uint32_t(seed >> 32));
        ++counter;
        r = (uint64_t{b.v[0]} << 32) | b.v[1];
      } while (r >= UINT64_MAX - UINT64_MAX % bound);
      std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(r % bound)]);
    }
    return p;
  };
  for (const auto& [n, seed, epoch, rank] : std::vector<std::tuple<int64_t, uint64_t, int64_t, int>>{
           {5, 1, 0, 0}, {1000, 7, 3, 1}, {37, 0xFFFFFFFF12345ull, 9, 3}, {1, 2, 0, 0}, {0, 2, 0, 0}})
    CHECK(epoch_permutation(n, seed, epoch, rank) == reference(n, seed, epoch, rank));
  // Unbiased: over 24000 seeds every value lands in every one of 4 places
  // 6000 times, within 5 standard deviations (sqrt(24000 * 1/4 * 3/4) = 67).
  int64_t count[4][4] = {};
  for (uint64_t seed = 0; seed < 24000; ++seed) {
    const auto p = epoch_permutation(4, seed, 0, 0);
    for (int pos = 0; pos < 4; ++pos) ++count[pos][p[static_cast<size_t>(pos)]];
  }
  for (const auto& pos : count)
    for (int64_t c : pos) CHECK(std::abs(c - 6000) < 335);
}

TEST_CASE("loader: Neuron Inverter shards, coverage, order, values", "[loader]") {
  Tmp d;
  write_ni(d / "ni.h5", 50, 16);
  LoaderOptions o;
  o.batch_size = 8;
  o.seed = 11;
  o.reduce = {2};
  // One rank: floor(50 / 1 / 8) * 8 = 48 samples, each exactly once per epoch.
  auto L = open_loader({DataFormat::NeuronInverter, d / "ni.h5", Split::Train}, o);
  REQUIRE(L->batches_per_epoch() == 6);
  REQUIRE(L->sample_shape() == Shape({3, 8}));
  std::vector<Tensor> xs;
  auto e0 = epoch_ids(*L, 0, &xs);
  auto sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 48; ++i) REQUIRE(sorted[static_cast<size_t>(i)] == i);
  REQUIRE(e0 != epoch_ids(*L, 1));  // reshuffled
  // Values: transposed and averaged along t.
  const int64_t i0 = e0[0];
  REQUIRE(xs[0].at({0, 2, 3}) == Approx((ni_value(i0, 6, 2) + ni_value(i0, 7, 2)) / 2));
  // Same seed -> same order; other seed -> other order.
  auto L2 = open_loader({DataFormat::NeuronInverter, d / "ni.h5", Split::Train}, o);
  REQUIRE(epoch_ids(*L2, 0) == e0);
  o.seed = 12;
  REQUIRE(epoch_ids(*open_loader({DataFormat::NeuronInverter, d / "ni.h5", Split::Train}, o), 0) != e0);
  // Two ranks: contiguous disjoint slices of floor(50 / 2 / 8) * 8 = 24.
  std::set<int64_t> all;
  for (int r = 0; r < 2; ++r) {
    o.rank = r;
    o.world = 2;
    auto Lr = open_loader({DataFormat::NeuronInverter, d / "ni.h5", Split::Train}, o);
    REQUIRE(Lr->local_samples() == 24);
    for (int64_t id : epoch_ids(*Lr, 0)) {
      REQUIRE(id >= r * 24);
      REQUIRE(id < (r + 1) * 24);
      all.insert(id);
    }
  }
  REQUIRE(all.size() == 48);
  // data.max_train_samples: the first 20 samples only, sharded as a set of 20.
  o.max_samples = 20;
  std::set<int64_t> capped;
  for (int r = 0; r < 2; ++r) {
    o.rank = r;
    auto Lr = open_loader({DataFormat::NeuronInverter, d / "ni.h5", Split::Train}, o);
    REQUIRE(Lr->local_samples() == 8);  // floor(20 / 2 / 8) * 8
    for (int64_t id : epoch_ids(*Lr, 0)) capped.insert(id);
  }
  REQUIRE(capped.size() == 16);
  REQUIRE(*capped.rbegin() == 15);  // rank 1: samples 8..15
  o.max_samples = 15;               // 7 a rank: less than a batch
  REQUIRE_THROWS_WITH(open_loader({DataFormat::NeuronInverter, d / "ni.h5", Split::Train}, o),
                      Catch::Contains("has 50 samples (15 used: data.max_train_samples)"));
  // Reinterpret quirk: sample memory (T, C) read as (C, T).
  o = LoaderOptions{};
  o.batch_size = 2;
  o.shuffle = false;
  o.ni_layout = NiLayout::Reinterpret;
  LoaderBatch b;
  auto Lq = open_loader({DataFormat::NeuronInverter, d / "ni.h5", Split::Train}, o);
  REQUIRE(Lq->next(b));
  // flat index 16 + 1 of sample 0 = (t 5, c 2)
  REQUIRE(b.x.at({0, 1, 1}) == ni_value(0, 5, 2));
}

TEST_CASE("loader: resume mid-epoch, prefetch == synchronous, cache == uncached", "[loader]") {
  Tmp d;
  write_cf(d / "cf/train", 3, 6, 4);
  const DataSpec spec{DataFormat::CosmoFlow, d / "cf", Split::Train};
  LoaderOptions o;
  o.batch_size = 4;
  o.seed = 5;
  o.reduce = {2};
  o.transform.kind = kernels::FusedTransform::Log1p;
  auto ref = open_loader(spec, o);
  REQUIRE(ref->batches_per_epoch() == 4);  // 18 samples -> 4 batches of 4
  REQUIRE(ref->sample_shape() == Shape({4, 2, 2, 2}));
  std::vector<std::vector<Tensor>> want(3);
  std::vector<std::vector<int64_t>> ids(3);
  for (int e = 0; e < 3; ++e) ids[e] = epoch_ids(*ref, e, &want[e]);
  for (int e = 0; e < 3; ++e) {
    std::set<int64_t> u(ids[e].begin(), ids[e].end());
    REQUIRE(u.size() == 16);
  }
  // Value: log1p then 2x2x2 mean of sample ids[0][0], channel 1, block (1, 0, 1).
  {
    const int64_t g = ids[0][0];
    double s = 0;
    for (int a = 2; a < 4; ++a)
      for (int b = 0; b < 2; ++b)
        for (int z = 2; z < 4; ++z) s += std::log1p(double((g + ((a * 4 + b) * 4 + z) * 4 + 1) % 50));
    REQUIRE(want[0][0].at({0, 1, 1, 0, 1}) == Approx(s / 8).epsilon(1e-5));
  }
  // Loaders with options `lo` at every prefetch depth in `depths`, cache on
  // and off, one to three I/O threads, batches made from RAM in one chunk or
  // in chunks of one sample (claimed by whichever thread comes first: the
  // I/O thread, a converter, or next() waiting for it), the files read
  // through HDF5 or mapped, all deliver the batches `expected` of the
  // epochs' samples `order`.
  const auto all_give = [&](LoaderOptions lo, std::vector<int> depths, std::vector<bool> caches,
                            const std::vector<std::vector<Tensor>>& expected,
                            const std::vector<std::vector<int64_t>>& order) {
    const int64_t whole = 1 << 30;  // every batch in one chunk
    for (int depth : depths)
      for (bool cache : caches)
        for (int io : {1, 2, 3, kMaxIoThreads})
          for (int64_t chunk : {int64_t{1}, whole})
            for (bool map : {false, true}) {
              lo.memory_map = map;
              lo.chunk_bytes = chunk;
              lo.prefetch_depth = depth;
              lo.cache_in_memory = cache;
              lo.io_threads = io;
              const int64_t cached_before = cache_in_use();
              auto L = open_loader(spec, lo);
              for (int e = 0; e < 3; ++e) {
                std::vector<Tensor> xs;
                REQUIRE(epoch_ids(*L, e, &xs) == order[e]);
                for (size_t i = 0; i < xs.size(); ++i) REQUIRE(same(xs[i], expected[e][i]));
                REQUIRE(L->wait_seconds() >= 0);
              }
              if (cache && !map) REQUIRE(cache_in_use() > cached_before);  // this loader's cache was used
            }
  };
  SECTION("synchronous and uncached give the same batches") {
    // io_threads 2, 3: reads of sample k + 1 overlap the conversion of the
    // samples before it (on one converter, or alternately on two).
    all_give(o, {0, 1, 3}, {false, true}, want, ids);
  }
  SECTION("full resolution: the cache keeps raw samples, converted by every thread later") {
    // Batch 4: 16 of the 18 samples per epoch, so a later epoch's batches mix
    // samples converted from the cache with samples read for the first time.
    // Batch 1: a lone cached sample goes to the (last) converter, this
    // thread (and with 3 threads the first converter) has nothing to convert.
    for (int64_t batch : {4, 1}) {
      o.reduce = {};
      o.batch_size = batch;
      o.prefetch_depth = 0;
      o.cache_in_memory = false;
      auto R = open_loader(spec, o);
      std::vector<std::vector<Tensor>> full(3);
      std::vector<std::vector<int64_t>> order(3);
      for (int e = 0; e < 3; ++e) order[e] = epoch_ids(*R, e, &full[e]);
      all_give(o, {0, 2}, {true}, full, order);
    }
  }
  SECTION("restore resumes mid-epoch with the same order") {
    auto L = open_loader(spec, o);
    L->start_epoch(1);
    LoaderBatch b;
    REQUIRE(L->next(b));
    REQUIRE(L->next(b));
    const LoaderState st = L->state();
    REQUIRE(st.epoch == 1);
    REQUIRE(st.batch == 2);
    auto R = open_loader(spec, o);
    R->restore(st);
    for (int64_t k = 2; k < 4; ++k) {
      REQUIRE(R->next(b));
      REQUIRE(b.index == k);
      REQUIRE(same(b.x, want[1][static_cast<size_t>(k)]));
    }
    REQUIRE_FALSE(R->next(b));
    LoaderState bad = st;
    bad.seed = 99;
    REQUIRE_THROWS_WITH(R->restore(bad), Catch::Contains("seed"));
  }
  SECTION("destroyed mid-epoch without hanging") {
    auto L = open_loader(spec, o);
    L->start_epoch(0);
    LoaderBatch b;
    REQUIRE(L->next(b));
    L.reset();
  }
}

TEST_CASE("loader: the cache keeps the smaller of the stored and the converted samples", "[loader]") {
  Tmp d;
  write_cf(d / "cf", 2, 4, 8);  // 8 uint16 samples of 4 x 8^3
  write_ni(d / "ni.h5", 40, 32);  // float32 (T = 32, C = 3)
  set_cache_budget(int64_t(1) << 30);
  struct Case {
    DataSpec spec;
    std::vector<int64_t> reduce;
    int64_t want_cache;  // bytes the loader should hold
    bool map = false;    // CosmoFlow files mapped (LoaderOptions::memory_map)
  };
  const DataSpec cf{DataFormat::CosmoFlow, d / "cf", Split::Train}, ni{DataFormat::NeuronInverter, d / "ni.h5", Split::Train};
  const std::vector<Case> cases = {
      {cf, {}, 8 * 4 * 512 * 2},              // full resolution: the uint16 bytes (float32 would be twice that)
      {cf, {2, 2, 2}, 8 * 4 * 64 * 4},        // 1/8: the reduced float32 samples
      {cf, {}, 0, true},                      // mapped: in memory already, as a preloaded shard
      {cf, {2, 2, 2}, 8 * 4 * 64 * 4, true},  // mapped, 1/8: the reduction is kept
      {ni, {}, 0},                            // preloaded, float32 in and out: nothing more to keep
      {ni, {2}, 40 / 8 * 8 * 3 * 16 * 4},     // preloaded, halved: the reduced samples (the shard: 5 batches of 8)
  };
  for (const Case& c : cases) {
    for (int io : {1, 2, 3}) {
      INFO(c.spec.path << " reduce " << c.reduce.size() << " mapped " << c.map << " io_threads " << io);
      LoaderOptions o;
      o.memory_map = c.map;
      o.batch_size = 8;
      o.seed = 3;
      o.io_threads = io;
      o.reduce = c.reduce;
      std::vector<Tensor> x0, x1, y0, y1;
      {
        auto L = open_loader(c.spec, o);
        CHECK(L->caching());
        CHECK(cache_in_use() == c.want_cache);
        epoch_ids(*L, 0, &x0);
        epoch_ids(*L, 1, &x1);  // from the cache
      }
      CHECK(cache_in_use() == 0);
      o.cache_in_memory = false;
      auto U = open_loader(c.spec, o);
      epoch_ids(*U, 0, &y0);
      epoch_ids(*U, 1, &y1);
      REQUIRE(x1.size() == y1.size());
      REQUIRE(!x1.empty());
      for (size_t i = 0; i < x1.size(); ++i) CHECK((same(x0[i], y0[i]) && same(x1[i], y1[i])));
    }
  }
  set_cache_budget(0);
}

TEST_CASE("loader: one cache budget per process, shared by all loaders", "[loader]") {
  Tmp d;
  write_cf(d / "cf", 2, 4, 8);  // 8 samples of 4 x 8^3 uint16: the cache keeps these 4 KiB each
  const int64_t shard = 8 * 4 * 512 * 2;
  LoaderOptions o;
  o.batch_size = 2;
  o.seed = 5;
  o.memory_map = false;  // streamed files: what the cache is for
  const DataSpec spec{DataFormat::CosmoFlow, d / "cf", Split::Train};
  set_cache_budget(shard * 3 / 2);  // room for one shard, not two
  REQUIRE(cache_in_use() == 0);
  std::vector<Tensor> xa0, xa1, xb0, xb1;
  {
    auto a = open_loader(spec, o);
    CHECK(a->caching());
    CHECK(cache_in_use() == shard);
    auto b = open_loader(spec, o);
    CHECK_FALSE(b->caching());  // would exceed the budget: streams every epoch instead
    CHECK(cache_in_use() == shard);
    // Same batches either way (epoch 1 of `a` comes from its cache).
    epoch_ids(*a, 0, &xa0);
    epoch_ids(*a, 1, &xa1);
    epoch_ids(*b, 0, &xb0);
    epoch_ids(*b, 1, &xb1);
    REQUIRE(xa1.size() == xb1.size());
    for (size_t i = 0; i < xa1.size(); ++i) CHECK((same(xa0[i], xb0[i]) && same(xa1[i], xb1[i])));
  }
  CHECK(cache_in_use() == 0);  // released with the loaders
  {
    auto c = open_loader(spec, o);
    CHECK(c->caching());
    o.cache_max_bytes = shard - 1;  // a loader's own cap on top of the budget
    auto e = open_loader(spec, o);
    CHECK_FALSE(e->caching());
  }
  // The default budget divides a quarter of the memory among the node's ranks.
  set_cache_budget(0);
  for (const char* v : {"MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"}) ::unsetenv(v);
  const int64_t one = default_cache_budget();
  ::setenv("MPI_LOCALNRANKS", "4", 1);
  CHECK(default_cache_budget() == one / 4);
  CHECK(cache_budget() == one / 4);
  ::unsetenv("MPI_LOCALNRANKS");
  CHECK(cache_budget() == one);
}

TEST_CASE("loader: prefetching across epochs never changes the batches", "[loader]") {
  Tmp d;
  write_cf(d / "cf/train", 3, 6, 4);
  const DataSpec spec{DataFormat::CosmoFlow, d / "cf", Split::Train};
  LoaderOptions o;
  o.batch_size = 4;
  o.seed = 9;
  o.reduce = {2};
  o.cache_in_memory = false;
  o.prefetch_depth = 0;  // the reference: synchronous reads, nothing ahead
  auto ref = open_loader(spec, o);
  std::vector<std::vector<Tensor>> want(6);
  std::vector<std::vector<int64_t>> ids(6);
  for (int e = 0; e < 6; ++e) ids[e] = epoch_ids(*ref, e, &want[e]);
  auto check_epoch = [&](Loader& L, int e) {
    std::vector<Tensor> xs;
    REQUIRE(epoch_ids(L, e, &xs) == ids[e]);
    for (size_t i = 0; i < xs.size(); ++i) REQUIRE(same(xs[i], want[e][i]));
  };
  for (int depth : {1, 2, 3, 6})
    for (bool cache : {false, true}) {
      DYNAMIC_SECTION("depth " << depth << " cache " << cache) {
        o.prefetch_depth = depth;
        o.cache_in_memory = cache;
        o.prefetch_next_epoch = true;
        auto L = open_loader(spec, o);
        check_epoch(*L, 0);
        check_epoch(*L, 1);  // the predicted epoch: taken over from the prefetch
        check_epoch(*L, 4);  // not the predicted one: discarded
        check_epoch(*L, 4);  // a repeat ...
        check_epoch(*L, 4);  // ... predicts the same epoch again
        check_epoch(*L, 5);
        // restore() into the prefetched epoch, mid-way and at its start.
        L->start_epoch(2);
        LoaderBatch b;
        while (L->next(b)) {
        }
        L->restore({3, 1, o.seed});
        for (int64_t k = 1; k < 4; ++k) {
          REQUIRE(L->next(b));
          REQUIRE(b.index == k);
          REQUIRE(same(b.x, want[3][static_cast<size_t>(k)]));
        }
        REQUIRE_FALSE(L->next(b));
        L->restore({0, 0, o.seed});
        check_epoch(*L, 0);
        // Leaving an epoch half-way (max_steps_per_epoch) while the next one is queued.
        L->start_epoch(1);
        for (int k = 0; k < 3; ++k) REQUIRE(L->next(b));
        L->start_epoch(2);
        REQUIRE(L->next(b));
        REQUIRE(same(b.x, want[2][0]));
        L->start_epoch(3);  // epoch 2 left after one batch
        check_epoch(*L, 3);
        REQUIRE(L->state().epoch == 3);
        REQUIRE(L->state().batch == 4);
      }
    }
  SECTION("without shuffling, prefetched batches serve any epoch") {
    o.shuffle = false;
    o.prefetch_depth = 0;
    auto r = open_loader(spec, o);
    std::vector<Tensor> xs0;
    const auto id0 = epoch_ids(*r, 0, &xs0);
    o.prefetch_depth = 2;
    auto L = open_loader(spec, o);
    for (int e : {0, 0, 7, 0}) {
      std::vector<Tensor> xs;
      REQUIRE(epoch_ids(*L, e, &xs) == id0);
      for (size_t i = 0; i < xs.size(); ++i) REQUIRE(same(xs[i], xs0[i]));
    }
  }
}

TEST_CASE("loader: Neuron Inverter batches equal the checked kernel on each sample", "[loader]") {
  Tmp d;
  write_ni(d / "ni.h5", 40, 32);
  // io_threads 2, 3: the converter threads take equal parts of each (odd)
  // batch; io 0 here: synchronous, the caller's OpenMP threads do.
  for (int io : {0, 1, 2, 3})
    for (NiLayout lay : {NiLayout::Transpose, NiLayout::Reinterpret})
      for (int64_t f : {1, 2, 4}) {
        const int64_t B = io == 1 ? 8 : 7;  // 7 over 3 threads: parts of 2, 2, 3
        LoaderOptions o;
        o.batch_size = B;
        o.io_threads = std::max(io, 1);
        if (io == 0) o.prefetch_depth = 0;
        o.seed = 3;
        o.reduce = {f};
        o.ni_layout = lay;
        // One sample per chunk: every thread of the batch (I/O thread,
        // converters, next()'s) gets some.
        o.chunk_bytes = lay == NiLayout::Transpose ? 1 : o.chunk_bytes;
        o.transform.kind = kernels::FusedTransform::Scale;
        o.transform.scale = {0.5f, 2.f, -1.f};
        o.transform.shift = {1.f, 0.f, 0.25f};
        auto L = open_loader({DataFormat::NeuronInverter, d / "ni.h5", Split::Train}, o);
        const Tensor frames = H5File::open_read(d / "ni.h5").read("train_frames");  // [40, 32, 3]
        kernels::FusedDownsampleSpec spec;
        spec.layout =
            lay == NiLayout::Transpose ? kernels::InputLayout::ChannelsLast : kernels::InputLayout::ChannelsFirst;
        spec.transform = o.transform.kind;
        spec.scale = o.transform.scale;
        spec.shift = o.transform.shift;
        spec.levels = {{f}};
        // Epoch 1: reduced samples come from the in-memory cache (gathered
        // by several threads when synchronous).
        for (int e : {0, 1}) {
          std::vector<Tensor> xs;
          const auto ids = epoch_ids(*L, e, &xs);
          REQUIRE(ids.size() == static_cast<size_t>(40 / B * B));  // every whole batch of the 40 samples
          for (size_t k = 0; k < ids.size(); ++k) {
            Tensor one = Tensor::empty(lay == NiLayout::Transpose ? Shape{1, 32, 3} : Shape{1, 3, 32});
            std::memcpy(one.raw_data(), frames.data<float>() + ids[k] * 96, 96 * 4);
            const Tensor y = kernels::fused_downsample(cpu_stream(), one, spec)[0];  // [1, 3, 32 / f]
            const Tensor& b = xs[k / static_cast<size_t>(B)];
            REQUIRE(std::memcmp(y.raw_data(), b.data<float>() + (k % static_cast<size_t>(B)) * y.numel(), y.nbytes()) ==
                    0);
          }
        }
      }
}

TEST_CASE("loader: next() makes chunks of a batch from RAM that the I/O thread has not done", "[loader]") {
  // The chunks of batch 0 that the I/O thread and the converters take are
  // held until the caller has made one: without the caller joining in, they
  // are released only by the timeout and the check below fails (it never hangs).
  Tmp d;
  write_ni(d / "ni.h5", 64, 32);
  for (int64_t reduce : {1, 2})  // preloaded and converted in place (a gather), or reduced per sample
    for (int io : {1, 3}) {
      LoaderOptions o;
      o.batch_size = 16;
      o.seed = 4;
      o.reduce = {reduce};
      o.cache_in_memory = false;
      o.prefetch_depth = 1;
      o.prefetch_next_epoch = false;  // batch 0 is made once
      o.io_threads = io;
      o.chunk_bytes = 1;  // a chunk per sample: 16 per batch
      const std::thread::id caller = std::this_thread::get_id();
      std::mutex mu;
      std::condition_variable cv;
      int64_t by_caller = 0, chunks = 0;
      bool gave_up = false;  // waited 10 s once: the others run at once
      o.on_chunk = [&](int64_t batch, int64_t /*chunk*/) {
        std::unique_lock<std::mutex> l(mu);
        if (batch != 0) return;
        ++chunks;
        if (std::this_thread::get_id() == caller) {
          ++by_caller;
          cv.notify_all();
        } else if (!gave_up) {  // the I/O thread, a converter
          gave_up = !cv.wait_for(l, std::chrono::seconds(10), [&] { return by_caller > 0; });
        }
      };
      auto L = open_loader({DataFormat::NeuronInverter, d / "ni.h5", Split::Train}, o);
      std::vector<Tensor> xs;
      const auto ids = epoch_ids(*L, 0, &xs);
      {
        std::lock_guard<std::mutex> l(mu);
        INFO("reduce " << reduce << ", io_threads " << io);
        CHECK(chunks == 16);  // each chunk of batch 0 made once
        CHECK(by_caller >= 1);
      }
      // The same batches as a synchronous loader's (no I/O thread at all).
      LoaderOptions s = o;
      s.on_chunk = nullptr;
      s.prefetch_depth = 0;
      auto S = open_loader({DataFormat::NeuronInverter, d / "ni.h5", Split::Train}, s);
      std::vector<Tensor> want;
      REQUIRE(epoch_ids(*S, 0, &want) == ids);
      for (size_t k = 0; k < xs.size(); ++k) REQUIRE(same(xs[k], want[k]));
    }
}

TEST_CASE("loader: next() lends a batch its OpenMP team less one thread per loader thread", "[loader]") {
  // Six OpenMP threads and io_threads 3 (the I/O thread and 2 converters):
  // next() may lend 3, so at most 6 threads make batch 0's chunks -- one per
  // core on a 6-core machine. Each thread's first chunk waits until 8 have
  // arrived (what lending all but one, 5 + 3, would give) or 0.5 s: with the
  // old count every thread gets a chunk and the check fails; with the right
  // one it cannot fail whatever the timing.
  Tmp d;
  write_ni(d / "ni.h5", 64, 32);
  const int team = omp_get_max_threads();
  omp_set_num_threads(6);
  LoaderOptions o;
  o.batch_size = 16;
  o.seed = 4;
  o.cache_in_memory = false;
  o.prefetch_depth = 1;
  o.prefetch_next_epoch = false;
  o.io_threads = 3;
  o.chunk_bytes = 1;  // a chunk per sample: 16 per batch
  std::mutex mu;
  std::condition_variable cv;
  std::set<std::thread::id> makers;
  o.on_chunk = [&](int64_t batch, int64_t /*chunk*/) {
    std::unique_lock<std::mutex> l(mu);
    if (batch != 0 || !makers.insert(std::this_thread::get_id()).second) return;
    cv.notify_all();
    cv.wait_for(l, std::chrono::milliseconds(500), [&] { return makers.size() >= 8; });
  };
  auto L = open_loader({DataFormat::NeuronInverter, d / "ni.h5", Split::Train}, o);
  const auto ids = epoch_ids(*L, 0, nullptr);
  omp_set_num_threads(team);
  std::lock_guard<std::mutex> l(mu);
  CHECK(ids.size() == 64);
  CHECK(makers.size() >= 2);  // the held chunks were shared
  CHECK(makers.size() <= 6);
}
