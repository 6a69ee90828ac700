// Loaders: coverage and sharding, deterministic per-epoch order, resume
// mid-epoch, prefetch == synchronous, cache == uncached, values through the
// fused reduction, and one message per bad-input case.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <limits>
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
  // A fixed value pins the algorithm: any change of the order breaks resumed runs.
  REQUIRE(epoch_permutation(5, 1, 0, 0) == epoch_permutation(5, 1, 0, 0));
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

TEST_CASE("loader: a CosmoFlow split's files as the loaders and mrmf eval list them", "[loader]") {
  Tmp d;
  write_cf(d / "flat", 3, 1, 4);       // c00.h5 .. c02.h5 in the folder itself
  write_cf(d / "split/val", 2, 1, 4);  // <folder>/<split>/
  const auto files = [](const std::string& path, Split s) {
    return cosmoflow_split_files({DataFormat::CosmoFlow, path, s});
  };
  const auto flat = files(d / "flat", Split::Val);
  REQUIRE(flat.size() == 3);
  for (size_t i = 0; i < flat.size(); ++i) REQUIRE(fs::path(flat[i]).filename() == "c0" + std::to_string(i) + ".h5");
  const auto val = files(d / "split", Split::Val);
  REQUIRE(val.size() == 2);
  REQUIRE(fs::path(val[1]).parent_path().filename() == "val");
  // A comma-separated list keeps its order.
  const auto listed = files(flat[2] + "," + flat[0], Split::Train);
  REQUIRE(listed == std::vector<std::string>{flat[2], flat[0]});
  // No test split under the folder (and no files beside it): named.
  const std::string e = err([&] { files(d / "split", Split::Test); });
  REQUIRE_THAT(e, Catch::Contains("CosmoFlow split 'test'"));
  REQUIRE_THAT(e, Catch::Contains((fs::path(d / "split") / "test").string()));
}

TEST_CASE("loader: CosmoFlow file shards and the LBANN layout", "[loader]") {
  Tmp d;
  write_cf(d / "cf", 3, 4, 4);
  LoaderOptions o;
  o.batch_size = 2;
  // 3 files of 4 over 2 ranks: samples 0-5 (file 0, half of file 1) and 6-11;
  // both run 3 batches of 2 -- dealing whole files would leave rank 0 with 8
  // samples and rank 1 with 4, and rank 0 would drop two of its four batches.
  std::set<int64_t> seen;
  for (int r = 0; r < 2; ++r) {
    o.rank = r;
    o.world = 2;
    auto L = open_loader({DataFormat::CosmoFlow, d / "cf", Split::Train}, o);
    REQUIRE(L->batches_per_epoch() == 3);
    REQUIRE(L->shard_ids().size() == 6);
    for (int64_t id : L->shard_ids()) {
      REQUIRE(id / 6 == r);
      seen.insert(id);
    }
  }
  REQUIRE(seen.size() == 12);
  // Files that divide evenly are whole-file shards: 3 ranks, one file each.
  for (int r = 0; r < 3; ++r) {
    o.rank = r;
    o.world = 3;
    auto L = open_loader({DataFormat::CosmoFlow, d / "cf", Split::Train}, o);
    for (int64_t id : L->shard_ids()) REQUIRE(id / 4 == r);
  }
  // Fewer files than ranks: contiguous sample shards.
  o.world = 4;
  o.rank = 3;
  o.batch_size = 1;
  auto L4 = open_loader({DataFormat::CosmoFlow, d / "cf/c01.h5", Split::Train}, o);
  REQUIRE(L4->shard_ids() == std::vector<int64_t>{3});
  o.batch_size = 2;
  REQUIRE_THROWS_WITH(open_loader({DataFormat::CosmoFlow, d / "cf/c01.h5", Split::Train}, o),
                      Catch::Contains("smaller than one batch of 2"));
  // LBANN: one (4, D, H, W) sample per file.
  fs::create_directories(d.dir / "lb");
  for (int i = 0; i < 4; ++i) {
    Tensor full = Tensor::empty({4, 4, 4, 4});
    for (int64_t e = 0; e < full.numel(); ++e) full.data<float>()[e] = float(i * 1000 + e);
    Tensor lab = Tensor::full({4}, float(i));
    write_cosmoflow_lbann_file(d / ("lb/s" + std::to_string(i) + ".h5"), full, lab);
  }
  o = LoaderOptions{};
  o.batch_size = 4;
  o.shuffle = false;
  o.reduce = {2, 2, 1};
  auto Lb = open_loader({DataFormat::CosmoFlowLbann, d / "lb", Split::Train}, o);
  LoaderBatch b;
  REQUIRE(Lb->next(b));
  REQUIRE(b.x.shape() == Shape({4, 4, 2, 2, 4}));
  // sample 2, channel 3, (d, h, w) = (1, 0, 3): mean over d in {2, 3}, h in {0, 1}
  double s = 0;
  for (int dd = 2; dd < 4; ++dd)
    for (int h = 0; h < 2; ++h) s += 2000 + ((3 * 4 + dd) * 4 + h) * 4 + 3;
  REQUIRE(b.x.at({2, 3, 1, 0, 3}) == Approx(s / 4));
}

TEST_CASE("loader: bad input is reported with file, dataset and expectation", "[loader]") {
  Tmp d;
  LoaderOptions o;
  o.batch_size = 4;
  auto ni = [&](const std::string& f) { return open_loader({DataFormat::NeuronInverter, f, Split::Train}, o); };
  REQUIRE_THAT(err([&] { ni(d / "missing.h5"); }), Catch::Contains("missing.h5"));
  {
    LoaderOptions bad = o;
    bad.io_threads = 9;
    REQUIRE_THAT(err([&] { open_loader({DataFormat::NeuronInverter, d / "missing.h5", Split::Train}, bad); }),
                 Catch::Contains("io_threads must be 1 to 8, got 9"));
  }
  {  // missing labels dataset
    H5File f = H5File::create(d / "nolab.h5");
    f.write("train_frames", Tensor::full({8, 4, 3}, 0.f));
  }
  REQUIRE_THAT(err([&] { ni(d / "nolab.h5"); }), Catch::Contains("nolab.h5") && Catch::Contains("train_unitStar_par"));
  {  // wrong rank
    H5File f = H5File::create(d / "rank.h5");
    f.write("train_frames", Tensor::full({8, 12}, 0.f));
    f.write("train_unitStar_par", Tensor::full({8, 19}, 0.f));
  }
  REQUIRE_THAT(err([&] { ni(d / "rank.h5"); }), Catch::Contains("rank 2") && Catch::Contains("(N, T, C)"));
  {  // unsupported dtype
    H5File f = H5File::create(d / "dtype.h5");
    f.write("train_frames", Tensor::zeros({8, 4, 3}, DType::I32));
    f.write("train_unitStar_par", Tensor::full({8, 19}, 0.f));
  }
  REQUIRE_THAT(err([&] { ni(d / "dtype.h5"); }), Catch::Contains("train_frames") && Catch::Contains("float32 or float16"));
  {  // length mismatch
    H5File f = H5File::create(d / "len.h5");
    f.write("train_frames", Tensor::full({8, 4, 3}, 0.f));
    f.write("train_unitStar_par", Tensor::full({7, 19}, 0.f));
  }
  REQUIRE_THAT(err([&] { ni(d / "len.h5"); }), Catch::Contains("8 frames") && Catch::Contains("7 labels"));
  {  // empty split
    H5File f = H5File::create(d / "empty.h5");
    f.create_dataset("train_frames", {0, 4, 3}, DType::F32);
    f.create_dataset("train_unitStar_par", {0, 19}, DType::F32);
  }
  REQUIRE_THAT(err([&] { ni(d / "empty.h5"); }),
               Catch::Contains("empty.h5") && Catch::Contains("'train_frames'") && Catch::Contains("empty"));
  write_ni(d / "nan.h5", 8, 4, std::numeric_limits<float>::quiet_NaN());
  REQUIRE_THAT(err([&] { ni(d / "nan.h5"); }),
               Catch::Contains("nan.h5") && Catch::Contains("train_frames") && Catch::Contains("non-finite"));
  write_ni(d / "inf.h5", 8, 4, 0, std::numeric_limits<float>::infinity());
  REQUIRE_THAT(err([&] { ni(d / "inf.h5"); }),
               Catch::Contains("inf.h5") && Catch::Contains("train_unitStar_par") && Catch::Contains("non-finite"));
  write_ni(d / "ok.h5", 6, 6);
  o.batch_size = 8;
  REQUIRE_THAT(err([&] { ni(d / "ok.h5"); }), Catch::Contains("ok.h5") && Catch::Contains("at least one batch"));
  o.batch_size = 2;
  o.reduce = {4};
  REQUIRE_THAT(err([&] { ni(d / "ok.h5"); }), Catch::Contains("ok.h5") && Catch::Contains("train_frames") &&
                                                 Catch::Contains("length 6") && Catch::Contains("factor 4"));
  o.reduce = {2, 2};
  REQUIRE_THAT(err([&] { ni(d / "ok.h5"); }), Catch::Contains("spatial axis"));
  o.reduce = {};
  REQUIRE_THAT(err([&] { open_loader({DataFormat::CosmoFlow, d / "nothing/*.h5", Split::Train}, o); }),
               Catch::Contains("CosmoFlow split 'train'") && Catch::Contains("no files match") &&
                   Catch::Contains("'3Dmap'"));
  // A folder with train/ but neither val/ nor files of its own: the val split names both places it looked.
  write_cf(d / "cfsplit/train/", 1, 4, 4);
  REQUIRE_THAT(err([&] { open_loader({DataFormat::CosmoFlow, d / "cfsplit", Split::Val}, o); }),
               Catch::Contains("CosmoFlow split 'val'") && Catch::Contains("cfsplit/val/ or") &&
                   Catch::Contains("no files match"));
  // A streamed float32 sample with a NaN: the I/O thread's error comes out of next().
  fs::create_directories(d.dir / "cfnan");
  Tensor x = Tensor::full({4, 4, 4, 4, 4}, 1.f);
  x.data<float>()[3 * 256 + 7] = std::numeric_limits<float>::quiet_NaN();
  write_cosmoflow_file(d / "cfnan/a.h5", x, Tensor::full({4, 4}, 0.f));
  o.shuffle = false;
  o.batch_size = 2;
  // Through HDF5, with converter threads the read of sample 3 throws while
  // sample 2 is still being converted from its staging buffer: the batch's
  // jobs are waited for before the error leaves (ASan would see a buffer
  // freed under a running conversion), and the loader goes on with the next
  // epoch. Mapped, the sample's check in its chunk throws.
  for (bool map : {false, true})
    for (int io : {1, 2, 3}) {
      INFO("memory_map " << map << " io_threads " << io);
      o.io_threads = io;
      o.memory_map = map;
      // Batches made from RAM: the files are mapped. (Not the converse: with
      // the cache on, the I/O thread may already be making the next epoch's
      // first batch, from cached samples, in chunks.)
      std::atomic<int> chunks{0};
      o.on_chunk = [&](int64_t, int64_t) { ++chunks; };
      auto L = open_loader({DataFormat::CosmoFlow, d / "cfnan", Split::Train}, o);
      LoaderBatch b;
      REQUIRE(L->next(b));
      if (map) CHECK(chunks > 0);
      REQUIRE_THAT(err([&] { L->next(b); }), Catch::Contains("a.h5") && Catch::Contains("3Dmap") &&
                                                 Catch::Contains("sample 3") && Catch::Contains("non-finite"));
      L->start_epoch(1);
      REQUIRE(L->next(b));  // samples 0 and 1 again
    }
}

TEST_CASE("loader: reduce_on host is the CPU's own path, device needs a CUDA device", "[loader]") {
  Tmp d;
  write_cf(d / "cf", 2, 4, 8);
  LoaderOptions o;
  o.batch_size = 2;
  o.reduce = {2, 2, 2};
  o.transform.kind = kernels::FusedTransform::Log1p;
  auto A = open_loader({DataFormat::CosmoFlow, d / "cf", Split::Train}, o);
  o.reduce_on = ReduceOn::Host;
  auto H = open_loader({DataFormat::CosmoFlow, d / "cf", Split::Train}, o);
  std::vector<Tensor> xa, xh;
  REQUIRE(epoch_ids(*A, 0, &xa) == epoch_ids(*H, 0, &xh));
  REQUIRE(xa.size() == 4);
  for (size_t i = 0; i < xa.size(); ++i) REQUIRE(same(xa[i], xh[i]));
  o.reduce_on = ReduceOn::Device;
  REQUIRE_THAT(err([&] { open_loader({DataFormat::CosmoFlow, d / "cf", Split::Train}, o); }),
               Catch::Contains("reduce_on 'device' needs a CUDA device") && Catch::Contains("cpu"));
  REQUIRE(parse_reduce_on("host") == ReduceOn::Host);
  REQUIRE_THAT(err([] { parse_reduce_on("gpu"); }), Catch::Contains("unknown reduce_on 'gpu'"));
}

TEST_CASE("loader: labels stored as float16 or float64 are read as float32, and log1p refuses values <= -1",
          "[loader]") {
  Tmp d;
  LoaderOptions o;
  o.batch_size = 2;
  o.shuffle = false;
  // The authors' layout with float64 labels, LBANN's with float16 ones.
  fs::create_directories(d.dir / "cf64");
  {
    H5File f = H5File::create(d / "cf64/a.h5");
    f.write("3Dmap", from_float32(Tensor::full({2, 4, 4, 4, 4}, 3.f), DType::U16));
    Tensor l = Tensor::empty({2, 4}, DType::F64);
    for (int i = 0; i < 8; ++i) static_cast<double*>(l.raw_data())[i] = 0.25 * i - 1;
    f.write("unitPar", l);
    f.close();
  }
  fs::create_directories(d.dir / "lb16");
  for (int k = 0; k < 2; ++k) {
    H5File f = H5File::create(d / ("lb16/s" + std::to_string(k) + ".h5"));
    f.write("full", Tensor::full({4, 4, 4, 4}, 1.f));
    Tensor l = Tensor::empty({4});
    for (int i = 0; i < 4; ++i) l.data<float>()[i] = 0.5f * i - k;  // exact in float16
    f.write("unitPar", from_float32(l, DType::F16));
    f.close();
  }
  for (const auto& [fmt, dir] :
       {std::make_pair(DataFormat::CosmoFlow, "cf64"), std::make_pair(DataFormat::CosmoFlowLbann, "lb16")}) {
    INFO(dir);
    auto L = open_loader({fmt, d / dir, Split::Train}, o);
    LoaderBatch b;
    REQUIRE(L->next(b));
    for (int s = 0; s < 2; ++s)
      for (int p = 0; p < 4; ++p)
        CHECK(b.y.at({s, p}) == (fmt == DataFormat::CosmoFlow ? 0.25f * (s * 4 + p) - 1 : 0.5f * p - s));
  }
  // log1p of a value <= -1 is not finite: int16 and float32 data name the
  // sample, read through HDF5 or mapped.
  for (DType dt : {DType::I16, DType::F32})
    for (bool map : {false, true}) {
      INFO(dtype_name(dt) << " memory_map " << map);
      const fs::path dir = d.dir / ("neg_" + std::string(dtype_name(dt)));
      fs::create_directories(dir);
      Tensor x = Tensor::full({4, 4, 4, 4, 4}, 2.f);
      x.data<float>()[3 * 256 + 5] = -5.f;
      write_cosmoflow_file((dir / "a.h5").string(), from_float32(x, dt), Tensor::full({4, 4}, 0.f));
      LoaderOptions lo = o;
      lo.memory_map = map;
      auto plain = open_loader({DataFormat::CosmoFlow, dir.string(), Split::Train}, lo);
      LoaderBatch b;
      REQUIRE(plain->next(b));
      REQUIRE(plain->next(b));  // without a transform -5 is a value like any other
      lo.transform.kind = kernels::FusedTransform::Log1p;
      std::atomic<int> chunks{0};  // batches made from RAM: the file is mapped (the cache: see above)
      lo.on_chunk = [&](int64_t, int64_t) { ++chunks; };
      auto L = open_loader({DataFormat::CosmoFlow, dir.string(), Split::Train}, lo);
      REQUIRE(L->next(b));
      if (map) CHECK(chunks > 0);
      REQUIRE_THAT(err([&] { L->next(b); }), Catch::Contains("a.h5") && Catch::Contains("'3Dmap' sample 3") &&
                                                 Catch::Contains("value -5") && Catch::Contains("log1p"));
    }
}
