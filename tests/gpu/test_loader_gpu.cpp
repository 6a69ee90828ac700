// The loader on cuda:0: coarse data reduced on the device every batch
// (reduce_on device, from raw staging) and reduced on the host once and
// cached (reduce_on host, float32 staging) give the CPU loader's batches.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <vector>

#include "data/formats.h"
#include "data/h5file.h"
#include "data/loader.h"
#include "support/temp_dir.h"

using namespace mrmf;
using namespace mrmf::data;

namespace {
// `files` CosmoFlow files of four 8^3 x 4 uint16 cubes under <d>/cf; returns that folder.
std::string write_cubes(const test::TempDir& d, int files) {
  const std::string dir = (d.dir / "cf").string();
  std::filesystem::create_directories(dir);
  for (int f = 0; f < files; ++f) {
    Tensor x = Tensor::empty({4, 8, 8, 8, 4});
    for (int64_t e = 0; e < x.numel(); ++e) x.data<float>()[e] = float((f * 7 + e * 13) % 97);
    Tensor l = Tensor::full({4, 4}, float(f));
    write_cosmoflow_file(dir + "/c" + std::to_string(f) + ".h5", from_float32(x, DType::U16), l);
  }
  return dir;
}

// The largest difference between two runs' batches (host copies), which
// must have the same count and shapes.
double worst_difference(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].shape() == b[i].shape());
    for (int64_t e = 0; e < a[i].numel(); ++e)
      worst = std::max(worst, std::fabs(double(a[i].data<float>()[e]) - b[i].data<float>()[e]));
  }
  return worst;
}
}  // namespace

TEST_CASE("gpu: loader batches reduced on the device or on the host equal the CPU loader's", "[gpu][loader]") {
  test::TempDir d("mrmf_ld_gpu");
  const std::string dir = write_cubes(d, 2);
  LoaderOptions o;
  o.batch_size = 2;
  o.reduce = {2, 2, 1};
  o.transform.kind = kernels::FusedTransform::Log1p;
  // A chunk per sample: batches from RAM -- these contiguous files are
  // mapped, so every epoch's, and cached ones for reduce_on host -- are made
  // by the I/O thread and next() together (data/chunked_work.h), into pinned
  // staging.
  o.chunk_bytes = 1;
  auto batches = [&](Device dev, ReduceOn where) {
    LoaderOptions p = o;
    p.device = dev;
    p.reduce_on = where;
    auto L = open_loader({DataFormat::CosmoFlow, dir, Split::Train}, p);
    std::vector<Tensor> xs;
    for (int epoch = 0; epoch < 2; ++epoch) {  // the second epoch comes from the cache
      L->start_epoch(epoch);
      LoaderBatch b;
      while (L->next(b)) xs.push_back(b.x.to(Device::cpu()));
    }
    return xs;
  };
  const auto cpu = batches(Device::cpu(), ReduceOn::Auto);
  for (ReduceOn where : {ReduceOn::Device, ReduceOn::Host}) {
    const auto gpu = batches(Device::cuda(0), where);
    const double worst = worst_difference(gpu, cpu);
    INFO("reduce_on " << (where == ReduceOn::Host ? "host" : "device"));
    // host: the same kernel on the same CPU; device: the GPU kernels give the
    // CPU's bits (their own gpu tests require it) -- log1p of counts by
    // products on both -- so the same bits either way. A tolerance would let
    // a sum where the CPU takes a product through (~5e-6 here).
    CHECK(worst == 0.0);
  }
}

TEST_CASE("gpu: batches copied to the device by the I/O thread (overlap_h2d) equal those copied in next()",
          "[gpu][loader]") {
  test::TempDir d("mrmf_ld_gpu_overlap");
  const std::string dir = write_cubes(d, 3);
  LoaderOptions o;
  o.device = Device::cuda(0);
  o.batch_size = 2;
  o.prefetch_depth = 2;
  o.reduce = {2, 1, 2};
  o.chunk_bytes = 1;  // batches from RAM (mapped, or cached) made in chunks by the I/O thread and next() together
  // Several epochs (the ring wraps many times, next-epoch prefetch included),
  // then a restore into the middle of an epoch (prefetched jobs cancelled).
  // keep: the caller holds every device batch until the end (the loader must
  // not reuse a buffer someone holds); otherwise each is copied out and
  // released at once, as the trainer does, and the ring is reused.
  auto batches = [&](ReduceOn where, bool overlap, bool keep) {
    LoaderOptions p = o;
    p.reduce_on = where;
    p.overlap_h2d = overlap;
    auto L = open_loader({DataFormat::CosmoFlow, dir, Split::Train}, p);
    std::vector<Tensor> xs;
    const auto take = [&](const LoaderBatch& b) {
      REQUIRE(b.x.device() == o.device);
      xs.push_back(keep ? b.x : b.x.to(Device::cpu()));
      xs.push_back(keep ? b.y : b.y.to(Device::cpu()));
    };
    for (int epoch = 0; epoch < 3; ++epoch) {
      L->start_epoch(epoch);
      LoaderBatch b;
      while (L->next(b)) take(b);
    }
    L->restore({1, 2, o.seed});
    LoaderBatch b;
    while (L->next(b)) take(b);
    for (Tensor& t : xs) t = t.to(Device::cpu());
    return xs;
  };
  for (ReduceOn where : {ReduceOn::Device, ReduceOn::Host}) {
    const auto in_next = batches(where, false, false);
    for (bool keep : {false, true}) {
      INFO("reduce_on " << (where == ReduceOn::Host ? "host" : "device") << (keep ? ", batches kept" : ""));
      const auto by_io = batches(where, true, keep);
      REQUIRE(by_io.size() == in_next.size());
      for (size_t i = 0; i < in_next.size(); ++i) {
        REQUIRE(by_io[i].shape() == in_next[i].shape());
        REQUIRE(std::memcmp(by_io[i].raw_data(), in_next[i].raw_data(), in_next[i].nbytes()) == 0);
      }
    }
  }
}

TEST_CASE("gpu: mapped compressed or split files reduced on the device give the CPU loader's batches",
          "[gpu][loader]") {
  // With reduce_on device the raw samples of a batch go to pinned staging;
  // from mapped files -- gzip a sample per chunk, or unfiltered in quarters
  // of a sample -- they are decoded or put together in chunks that next()'s
  // threads join (on_chunk sees them), every epoch (no cache).
  test::TempDir d("mrmf_ld_gpu_chunks");
  const std::string dir = write_cubes(d, 2);
  for (const auto& [name, opts] :
       {std::pair<const char*, WriteOptions>{"gzip", {1, 4}}, {"split", {0, 0, false, {1, 4, 4, 8, 4}}}}) {
    const std::string out = (d.dir / name).string();
    std::filesystem::create_directories(out);
    for (int f = 0; f < 2; ++f) {
      const std::string file = "/c" + std::to_string(f) + ".h5";
      const H5File in = H5File::open_read(dir + file);
      H5File c = H5File::create(out + file);
      c.write("3Dmap", in.read("3Dmap"), opts);
      c.write("unitPar", in.read("unitPar"));
      c.close();  // write errors thrown here, not only logged
    }
  }
  std::atomic<int> chunks{0};
  auto batches = [&](const std::string& from, Device dev, int depth) {
    LoaderOptions o;
    o.prefetch_depth = depth;
    o.batch_size = 2;
    o.reduce = {2, 2, 1};
    o.transform.kind = kernels::FusedTransform::Log1p;
    o.chunk_bytes = 1;  // a sample per chunk
    o.cache_in_memory = false;
    o.device = dev;
    o.reduce_on = dev.is_cuda() ? ReduceOn::Device : ReduceOn::Auto;
    o.on_chunk = [&chunks](int64_t, int64_t) { ++chunks; };
    auto L = open_loader({DataFormat::CosmoFlow, from, Split::Train}, o);
    std::vector<Tensor> xs;
    for (int epoch = 0; epoch < 2; ++epoch) {
      L->start_epoch(epoch);
      LoaderBatch b;
      while (L->next(b)) xs.push_back(b.x.to(Device::cpu()));
    }
    return xs;
  };
  const auto cpu = batches(dir, Device::cpu(), 2);
  for (int depth : {0, 2})  // synchronous (next()'s team alone), and through the I/O thread
    for (const char* name : {"gzip", "split"}) {
      INFO(name << ", prefetch_depth " << depth);
      chunks = 0;
      const auto gpu = batches((d.dir / name).string(), Device::cuda(0), depth);
      // 2 epochs of 8 samples, a chunk each (and up to 2 batches of a third
      // prefetched); made sample by sample outside chunks: none.
      CHECK((chunks >= 2 * 8 && chunks <= 2 * 8 + 4));
      CHECK(worst_difference(gpu, cpu) == 0.0);  // the CPU's bits, as above
    }
}
