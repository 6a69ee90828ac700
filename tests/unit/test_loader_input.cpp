// What the loaders read and how they refuse bad input: a CosmoFlow split's
// files, file-level shards and the LBANN layout, one message per bad-input
// case (file, dataset, expectation), reduce_on, stored label types.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>

#include "core/error.h"
#include "data/formats.h"
#include "data/h5file.h"
#include "data/loader.h"
#include "data/shuffle.h"
#include "kernels/fused_downsample_ops.h"
#include "support/loader_fixtures.h"
#include "support/temp_dir.h"

using namespace mrmf;
using namespace mrmf::data;
namespace fs = std::filesystem;

using namespace mrmf::test::loader;

// (mrmf eval lists them with the same function; its CosmoFlow eval runs in
// tests/scripts/test_torch_state_dict.py.)
TEST_CASE("loader: a CosmoFlow split's files in the order the loaders read them", "[loader]") {
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
  for (size_t i = 0; i < val.size(); ++i) {
    REQUIRE(fs::path(val[i]).filename() == "c0" + std::to_string(i) + ".h5");
    REQUIRE(fs::path(val[i]).parent_path().filename() == "val");
  }
  // A glob, sorted.
  REQUIRE(files(d / "flat/c0[12].h5", Split::Train) == std::vector<std::string>{flat[1], flat[2]});
  // A comma-separated list keeps its order.
  const auto listed = files(flat[2] + "," + flat[0], Split::Train);
  REQUIRE(listed == std::vector<std::string>{flat[2], flat[0]});
  // No test split under the folder (and no files beside it): named.
  const std::string e = err([&] { files(d / "split", Split::Test); });
  REQUIRE_THAT(e, Catch::Contains("CosmoFlow split 'test'"));
  REQUIRE_THAT(e, Catch::Contains((fs::path(d / "split") / "test").string()));
  // Files beside the split folders are not taken for the missing split.
  write_cf(d / "split", 1, 1, 4);
  REQUIRE_THAT(err([&] { files(d / "split", Split::Test); }),
               Catch::Contains("no test/ folder in") && Catch::Contains("which has val/"));
  // A folder is listed, not globbed: '[', ']' and ',' in its name are characters.
  write_cf(d / "odd[1],v2/val", 2, 1, 4);
  write_cf(d / "odd1/val", 1, 1, 4);  // what the glob 'odd[1]' would match
  const auto odd = files(d / "odd[1],v2", Split::Val);
  REQUIRE(odd.size() == 2);
  REQUIRE(fs::path(odd[1]).parent_path() == fs::path(d / "odd[1],v2/val"));
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
  // data.max_train_samples: the first 6 of the 12 (file 0, half of file 1).
  o.max_samples = 6;
  seen.clear();
  for (int r = 0; r < 2; ++r) {
    o.rank = r;
    auto L = open_loader({DataFormat::CosmoFlow, d / "cf", Split::Train}, o);
    REQUIRE(L->shard_ids().size() == 3);  // 3 a rank (one batch of 2 an epoch)
    REQUIRE(L->batches_per_epoch() == 1);
    for (int64_t id : L->shard_ids()) seen.insert(id);
  }
  REQUIRE(seen == std::set<int64_t>{0, 1, 2, 3, 4, 5});
  o.max_samples = 0;
  // Files that divide evenly are whole-file shards: 3 ranks, one file each.
  for (int r = 0; r < 3; ++r) {
    o.rank = r;
    o.world = 3;
    auto L = open_loader({DataFormat::CosmoFlow, d / "cf", Split::Train}, o);
    REQUIRE(L->shard_ids().size() == 4);
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
    REQUIRE_THAT(err([&] {
                   open_loader({DataFormat::NeuronInverter, d / "missing.h5", Split::Train}, bad);
                 }),
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
  REQUIRE_THAT(err([&] { ni(d / "dtype.h5"); }),
               Catch::Contains("train_frames") && Catch::Contains("float32 or float16"));
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
  REQUIRE_THAT(
      err([&] {
        open_loader({DataFormat::CosmoFlow, d / "nothing/*.h5", Split::Train}, o);
      }),
      Catch::Contains("CosmoFlow split 'train'") && Catch::Contains("no files match") && Catch::Contains("'3Dmap'"));
  // A folder with train/ but no val/: the val split says so, and where its files were expected.
  write_cf(d / "cfsplit/train/", 1, 4, 4);
  REQUIRE_THAT(err([&] {
                 open_loader({DataFormat::CosmoFlow, d / "cfsplit", Split::Val}, o);
               }),
               Catch::Contains("CosmoFlow split 'val'") && Catch::Contains("no val/ folder in") &&
                   Catch::Contains("cfsplit/val/,"));
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
  // epoch. Mapped, the sample's check in its chunk throws. The failed batch
  // is lost, with or without prefetching (depth 0 reads in next()): the
  // next call does not read it again but ends the epoch.
  for (bool map : {false, true})
    for (int io : {0, 1, 2, 3}) {
      INFO("memory_map " << map << " io_threads " << io << " (0: no prefetching)");
      o.io_threads = std::max(io, 1);
      o.prefetch_depth = io == 0 ? 0 : 2;
      o.memory_map = map;
      // Batches made from RAM: the files are mapped. (Not the converse: with
      // the cache on, the I/O thread may already be making the next epoch's
      // first batch, from cached samples, in chunks.)
      std::atomic<int> chunks{0};
      o.on_chunk = [&](int64_t, int64_t) { ++chunks; };
      auto L = open_loader({DataFormat::CosmoFlow, d / "cfnan", Split::Train}, o);
      LoaderBatch b;
      REQUIRE(L->next(b));
      if (map && io > 0) CHECK(chunks > 0);
      REQUIRE_THAT(err([&] { L->next(b); }), Catch::Contains("a.h5") && Catch::Contains("3Dmap") &&
                                                 Catch::Contains("sample 3") && Catch::Contains("non-finite"));
      CHECK(L->state().batch == 2);
      CHECK(!L->next(b));
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
  REQUIRE_THAT(err([&] {
                 open_loader({DataFormat::CosmoFlow, d / "cf", Split::Train}, o);
               }),
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
