// The offline reducer (mrmf downsample): values against a direct average,
// layouts and labels kept, 1/2 along one axis and 1/8, atomic/no-overwrite
// behaviour and the messages of bad requests.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/downsample.h"
#include "data/formats.h"
#include "data/h5file.h"
#include "support/temp_dir.h"

using namespace mrmf;
using namespace mrmf::data;
namespace fs = std::filesystem;

namespace {
struct Tmp : test::TempDir {
  Tmp() : test::TempDir("mrmf_ds") {}
};

// frames[n, t, c] = 100 n + t + 0.1 c (float32), labels[n, p] = n + p / 100.
void write_ni(const std::string& path, int64_t n, int64_t t) {
  NeuronInverterWriter w(path, DType::F32);
  for (Split s : {Split::Train, Split::Val}) {
    w.create_split(s, n, t, 3);
    Tensor f = Tensor::empty({n, t, 3}), l = Tensor::empty({n, 19});
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < t; ++j)
        for (int64_t c = 0; c < 3; ++c) f.data<float>()[(i * t + j) * 3 + c] = 100.f * i + j + 0.1f * c;
      for (int64_t p = 0; p < 19; ++p) l.data<float>()[i * 19 + p] = i + p / 100.f;
    }
    w.write(s, 0, f, l);
  }
  w.write_meta("{\"k\": 1}");
}

std::string err(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("downsample: Neuron Inverter along t equals the direct average", "[downsample]") {
  Tmp d;
  write_ni(d / "ni.h5", 5, 8);
  DownsampleOptions o;
  o.factor = 2;
  o.axes = "t";
  o.max_block_bytes = 8 * 3 * 4 * 2;  // two rows per block: exercises the streaming
  const auto s = downsample_dataset(d / "ni.h5", d / "ni_t4.h5", o);
  REQUIRE(s.samples == 10);
  const NeuronInverterFile f = NeuronInverterFile::open(d / "ni_t4.h5", {Split::Train, Split::Val});
  REQUIRE(f.info(Split::Train).t == 4);
  REQUIRE(f.info(Split::Train).dtype == DType::F32);
  const Batch b = f.read(Split::Val, 0, 5);
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t c = 0; c < 3; ++c) {
        const double want = ((100.0 * i + 2 * j + 0.1 * c) + (100.0 * i + 2 * j + 1 + 0.1 * c)) / 2;
        REQUIRE(b.frames.at({i, j, c}) == Approx(want).epsilon(1e-6));
      }
  REQUIRE(b.labels.at({3, 5}) == Approx(3.05f));
  REQUIRE(f.meta_json().value() == "{\"k\": 1}");
  REQUIRE(H5File::open_read(d / "ni_t4.h5").read_string_attribute("/", "mrmf_downsample").has_value());
  // No overwrite without force; force replaces.
  REQUIRE_THROWS_WITH(downsample_dataset(d / "ni.h5", d / "ni_t4.h5", o), Catch::Contains("--force"));
  o.force = true;
  o.factor = 4;
  downsample_dataset(d / "ni.h5", d / "ni_t4.h5", o);
  REQUIRE(NeuronInverterFile::open(d / "ni_t4.h5", {Split::Train}).info(Split::Train).t == 2);
}

TEST_CASE("downsample: a Neuron Inverter file of one split, its generator metadata made the coarse copy's",
          "[downsample]") {
  Tmp d;
  {
    NeuronInverterWriter w(d / "val_only.h5", DType::F32);
    w.create_split(Split::Val, 3, 8, 3);
    w.write(Split::Val, 0, Tensor::full({3, 8, 3}, 1.f), Tensor::full({3, 19}, 0.5f));
    w.write_meta("{\"time_bins\": 8, \"steps_per_bin\": 5, \"dt_ms\": 0.025}");
  }
  DownsampleOptions o;
  o.factor = 2;
  o.axes = "t";
  REQUIRE(downsample_dataset(d / "val_only.h5", d / "coarse.h5", o).samples == 3);
  const NeuronInverterFile f = NeuronInverterFile::open(d / "coarse.h5", {Split::Val});
  CHECK_FALSE(f.has(Split::Train));
  CHECK(f.info(Split::Val).t == 4);
  const auto meta = nlohmann::json::parse(f.meta_json().value());
  CHECK(meta["time_bins"] == 4);
  CHECK(meta["steps_per_bin"] == 10);  // a bin now spans twice the integration steps
  CHECK(meta["dt_ms"] == 0.025);
  CHECK(meta["downsampled"]["factor"] == 2);
  // A file with no split at all: named.
  {
    H5File e = H5File::create(d / "empty.h5");
    e.write("other", Tensor::full({2}, 1.f));
    e.close();
  }
  CHECK_THAT(err([&] { downsample_dataset(d / "empty.h5", d / "e2.h5", o); }),
             Catch::Contains("empty.h5") && Catch::Contains("no split"));
}

TEST_CASE("downsample: CosmoFlow folder, 1/2 along x and 1/8 along x,y,z", "[downsample]") {
  Tmp d;
  fs::create_directories(d.dir / "cf" / "train");
  fs::create_directories(d.dir / "cf" / "val");
  Tensor x = Tensor::empty({2, 4, 4, 4, 4}, DType::F32);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i % 251);
  Tensor lab = Tensor::full({2, 4}, 0.5f);
  const Tensor xu = from_float32(x, DType::U16);
  write_cosmoflow_file(d / "cf/train/a.h5", xu, lab);
  write_cosmoflow_file(d / "cf/val/b.h5", xu, lab);
  DownsampleOptions o;
  o.axes = "x";
  auto s = downsample_dataset(d / "cf", d / "half", o);
  REQUIRE(s.files == 2);
  const CosmoFlowFiles h = CosmoFlowFiles::open(d / "half/train/a.h5");
  REQUIRE(h.dims() == std::array<int64_t, 3>{2, 4, 4});
  REQUIRE(h.dtype() == DType::F32);
  // Stored contiguously: the loaders map the coarse copy (data/loader.h, memory_map).
  CHECK(H5File::open_read(d / "half/train/a.h5").contiguous_offset("3Dmap", DType::F32) > 0);
  const Batch hb = h.read(0, 0, 2);
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t a = 0; a < 2; ++a)
      for (int64_t c = 0; c < 4; ++c)
        REQUIRE(hb.frames.at({n, a, 1, 2, c}) == Approx((x.at({n, 2 * a, 1, 2, c}) + x.at({n, 2 * a + 1, 1, 2, c})) / 2));
  o.axes = "x,y,z";
  s = downsample_dataset(d / "cf", d / "eighth", o);
  const Batch eb = CosmoFlowFiles::open(d / "eighth/val/b.h5").read(0, 0, 2);
  REQUIRE(eb.frames.shape() == Shape({2, 2, 2, 2, 4}));
  double sum = 0;
  for (int a = 2; a < 4; ++a)
    for (int b = 0; b < 2; ++b)
      for (int z = 2; z < 4; ++z) sum += x.at({1, a, b, z, 3});
  REQUIRE(eb.frames.at({1, 1, 0, 1, 3}) == Approx(sum / 8));
  REQUIRE(eb.labels.at({1, 2}) == 0.5f);
}

TEST_CASE("downsample: an LBANN folder (one channels-first sample per file)", "[downsample]") {
  Tmp d;
  fs::create_directories(d.dir / "lb");
  std::vector<Tensor> xs;
  for (int i = 0; i < 3; ++i) {
    Tensor full = Tensor::empty({4, 4, 6, 8});
    for (int64_t e = 0; e < full.numel(); ++e) full.data<float>()[e] = static_cast<float>((e * 7 + i * 13) % 101);
    xs.push_back(full);
    write_cosmoflow_lbann_file(d / ("lb/s" + std::to_string(i) + ".h5"), from_float32(full, DType::I16),
                               Tensor::full({4}, 0.25f * i));
  }
  DownsampleOptions o;
  o.axes = "x,z";
  const auto s = downsample_dataset(d / "lb", d / "lb_out", o);
  CHECK(s.files == 3);
  const CosmoFlowLbannFiles out = CosmoFlowLbannFiles::open(d / "lb_out/*.h5");
  REQUIRE(out.size() == 3);
  CHECK(out.dims() == std::array<int64_t, 3>{2, 6, 4});
  CHECK(out.dtype() == DType::F32);
  CHECK(H5File::open_read(d / "lb_out/s0.h5").contiguous_offset("full", DType::F32) > 0);  // mapped when loaded
  for (size_t i = 0; i < 3; ++i) {
    const Batch b = out.read(i);
    CHECK(b.labels.at({3}) == 0.25f * i);
    for (int64_t c = 0; c < 4; ++c)
      for (int64_t a = 0; a < 2; ++a)
        for (int64_t z = 0; z < 4; ++z) {
          const Tensor& x = xs[i];
          const float want = (x.at({c, 2 * a, 5, 2 * z}) + x.at({c, 2 * a, 5, 2 * z + 1}) + x.at({c, 2 * a + 1, 5, 2 * z}) +
                              x.at({c, 2 * a + 1, 5, 2 * z + 1})) / 4;
          REQUIRE(b.frames.at({c, a, 5, z}) == Approx(want));
        }
  }
  // The factor must divide every sample's axes, checked before anything is written.
  o.axes = "y";
  o.factor = 4;
  const std::string m = err([&] { downsample_dataset(d / "lb", d / "lb_bad", o); });
  CHECK_THAT(m, Catch::Contains("s0.h5") && Catch::Contains("'full'") && Catch::Contains("length 6") &&
                    Catch::Contains("factor 4"));
  CHECK(!fs::exists(d / "lb_bad"));
}

TEST_CASE("downsample: bad requests name the file, dataset, axis length and factor", "[downsample]") {
  Tmp d;
  write_ni(d / "ni.h5", 2, 6);
  DownsampleOptions o;
  o.factor = 4;
  const std::string m = err([&] { downsample_dataset(d / "ni.h5", d / "o.h5", o); });
  REQUIRE_THAT(m, Catch::Contains("ni.h5") && Catch::Contains("train_frames") && Catch::Contains("length 6") &&
                      Catch::Contains("factor 4"));
  REQUIRE(!fs::exists(d / "o.h5"));
  o.factor = 2;
  o.axes = "x";
  REQUIRE_THAT(err([&] { downsample_dataset(d / "ni.h5", d / "o.h5", o); }), Catch::Contains("only reducible axis is t"));
  o.axes = "q";
  REQUIRE_THAT(err([&] { downsample_dataset(d / "ni.h5", d / "o.h5", o); }), Catch::Contains("unknown axis 'q'"));
  o.axes = "t";
  REQUIRE_THAT(err([&] { downsample_dataset(d / "missing.h5", d / "o.h5", o); }), Catch::Contains("missing.h5"));
  fs::create_directories(d.dir / "cf");
  Tensor x = from_float32(Tensor::full({1, 6, 4, 4, 4}, 1.f), DType::U16);
  write_cosmoflow_file(d / "cf/a.h5", x, Tensor::full({1, 4}, 0.f));
  o.axes = "x,y";
  o.factor = 4;
  REQUIRE_THAT(err([&] { downsample_dataset(d / "cf", d / "cf_out", o); }),
               Catch::Contains("a.h5") && Catch::Contains("3Dmap") && Catch::Contains("length 6") &&
                   Catch::Contains("factor 4"));
  REQUIRE(!fs::exists(d / "cf_out/a.h5"));
  // One CosmoFlow file where its folder is expected, and an empty axis name:
  // usage errors that say so (not "a Neuron Inverter file", not accepted).
  o.factor = 2;
  REQUIRE_THAT(err([&] { downsample_dataset(d / "cf/a.h5", d / "cf_out", o); }),
               Catch::Contains("is one CosmoFlow file") && Catch::Contains("folder"));
  for (const char* axes : {"x,,y", "x,y,z,", ",x"}) {
    o.axes = axes;
    REQUIRE_THAT(err([&] { downsample_dataset(d / "cf", d / "cf_out", o); }), Catch::Contains("an empty axis name"));
  }
  // A dangling link among the files: named (it was skipped, and the copy lacked it).
  o.axes = "x,y,z";
  fs::create_symlink(d / "nowhere.h5", d / "cf/b.h5");
  REQUIRE_THAT(err([&] { downsample_dataset(d / "cf", d / "cf_out", o); }),
               Catch::Contains("cf/b.h5 is a link to") && Catch::Contains("nowhere.h5, which does not exist"));
  REQUIRE(!fs::exists(d / "cf_out/a.h5"));
}

TEST_CASE("downsample: a CosmoFlow folder whose files disagree in layout or cube size is refused, nothing written",
          "[downsample]") {
  // Each file used to be checked alone: the copy held cubes of two sizes
  // (or both layouts), which no loader reads, and --force replaced a good
  // copy with it.
  Tmp d;
  const auto cube = [](int64_t n, int64_t a, int64_t b, int64_t c) {
    return from_float32(Tensor::full({n, a, b, c, 4}, 2.f), DType::U16);
  };
  const auto folder = [&](const std::string& name) {
    fs::create_directories(d / (name + "/train"));
    fs::create_directories(d / (name + "/val"));
    write_cosmoflow_file(d / (name + "/train/c0.h5"), cube(2, 4, 4, 4), Tensor::full({2, 4}, 0.f));
    write_cosmoflow_file(d / (name + "/val/c0.h5"), cube(2, 4, 4, 4), Tensor::full({2, 4}, 0.f));
  };
  DownsampleOptions o;
  o.factor = 2;
  o.axes = "x,y,z";
  // Another cube size in the train split, and in the val split.
  folder("sizes");
  write_cosmoflow_file(d / "sizes/train/c1.h5", cube(2, 8, 8, 8), Tensor::full({2, 4}, 0.f));
  folder("splits");
  fs::remove(d / "splits/val/c0.h5");
  write_cosmoflow_file(d / "splits/val/c0.h5", cube(2, 4, 4, 2), Tensor::full({2, 4}, 0.f));
  for (const char* name : {"sizes", "splits"}) {
    INFO(name);
    const std::string m = err([&] { downsample_dataset(d / name, d / (std::string(name) + "_half"), o); });
    CHECK_THAT(m, Catch::Contains("dataset '3Dmap' has (D, H, W) = (") &&
                      Catch::Contains("train/c0.h5 has (4, 4, 4)") &&
                      Catch::Contains("expected every file of a CosmoFlow folder to agree"));
    CHECK(!fs::exists(d / (std::string(name) + "_half")));
  }
  // --force over a good copy leaves it as it was.
  folder("good");
  downsample_dataset(d / "good", d / "out", o);
  const Tensor before = H5File::open_read(d / "out/train/c0.h5").read("3Dmap");
  o.force = true;
  CHECK_THAT(err([&] { downsample_dataset(d / "sizes", d / "out", o); }), Catch::Contains("sizes/train/c1.h5"));
  CHECK(!fs::exists(d / "out/train/c1.h5"));
  const Tensor after = H5File::open_read(d / "out/train/c0.h5").read("3Dmap");
  CHECK(std::memcmp(before.raw_data(), after.raw_data(), before.nbytes()) == 0);
  o.force = false;
  // Both layouts in one folder.
  folder("layouts");
  write_cosmoflow_lbann_file(d / "layouts/train/s0.h5", Tensor::full({4, 4, 4, 4}, 1.f), Tensor::full({4}, 0.f));
  CHECK_THAT(err([&] { downsample_dataset(d / "layouts", d / "layouts_half", o); }),
             Catch::Contains("s0.h5 holds LBANN's layout ('full') but") && Catch::Contains("the authors' ('3Dmap')"));
  CHECK(!fs::exists(d / "layouts_half"));
  // A file of the authors' layout that also holds a 'full' dataset is read
  // by its '3Dmap', as the loader reads it (it was taken for an LBANN file).
  folder("both");
  {
    H5File h = H5File::open_read(d / "both/train/c0.h5");
    const Tensor x = h.read("3Dmap"), y = h.read("unitPar");
    h.close();
    H5File w = H5File::create(d / "both/train/c0.h5");
    w.write("3Dmap", x);
    w.write("unitPar", y);
    w.write("full", Tensor::full({4, 2, 2, 2}, 9.f));
    w.close();
  }
  downsample_dataset(d / "both", d / "both_half", o);
  CHECK(H5File::open_read(d / "both_half/train/c0.h5").shape("3Dmap") == std::vector<int64_t>{2, 2, 2, 2, 4});
}

TEST_CASE("downsample: NaN or Inf in frames or labels is refused, naming file, dataset and element", "[downsample]") {
  Tmp d;
  // Neuron Inverter: a NaN frame in train, an Inf label in val.
  for (int which = 0; which < 2; ++which) {
    const std::string in = d / ("ni" + std::to_string(which) + ".h5");
    NeuronInverterWriter w(in, DType::F32);
    for (Split s : {Split::Train, Split::Val}) {
      w.create_split(s, 2, 4, 3);
      Tensor f = Tensor::full({2, 4, 3}, 1.f), l = Tensor::full({2, 19}, 0.f);
      if (which == 0 && s == Split::Train) f.data<float>()[13] = std::nanf("");
      if (which == 1 && s == Split::Val) l.data<float>()[20] = INFINITY;
      w.write(s, 0, f, l);
    }
    w.close();
    DownsampleOptions o;
    o.factor = 2;
    const std::string out = d / ("o" + std::to_string(which) + ".h5");
    const std::string m = err([&] { downsample_dataset(in, out, o); });
    INFO(m);
    if (which == 0)
      CHECK_THAT(m, Catch::Contains(in) && Catch::Contains("'train_frames'") && Catch::Contains("[1, 0, 1]"));
    else
      CHECK_THAT(m, Catch::Contains(in) && Catch::Contains("'val_unitStar_par'") && Catch::Contains("[1, 1]"));
    CHECK(!fs::exists(out));  // nothing half-written is left behind
  }
  // CosmoFlow: a NaN label.
  fs::create_directories(d.dir / "cf");
  Tensor l = Tensor::full({2, 4}, 0.f);
  l.data<float>()[5] = std::nanf("");
  write_cosmoflow_file(d / "cf/a.h5", from_float32(Tensor::full({2, 4, 4, 4, 4}, 1.f), DType::U16), l);
  DownsampleOptions o;
  o.factor = 2;
  o.axes = "x";
  const std::string m = err([&] { downsample_dataset(d / "cf", d / "cf_out", o); });
  CHECK_THAT(m, Catch::Contains("a.h5") && Catch::Contains("'unitPar'") && Catch::Contains("[1, 1]"));
  CHECK(!fs::exists(d / "cf_out/a.h5"));
  // Finite float32 values whose block sum overflows: refused (the mean was written as inf).
  {
    const std::string in = d / "big.h5";
    NeuronInverterWriter w(in, DType::F32);
    for (Split s : {Split::Train, Split::Val}) {
      w.create_split(s, 2, 4, 3);
      Tensor f = Tensor::full({2, 4, 3}, 1.f), lb = Tensor::full({2, 19}, 0.f);
      if (s == Split::Val) f.data<float>()[12] = f.data<float>()[15] = 3e38f;  // sample 1, t = 0 and 1, channel 0
      w.write(s, 0, f, lb);
    }
    w.close();
    DownsampleOptions ob;
    ob.factor = 2;
    const std::string mb = err([&] { downsample_dataset(in, d / "big_out.h5", ob); });
    INFO(mb);
    CHECK_THAT(mb, Catch::Contains("the coarse copy of " + in + ": dataset 'val_frames'") &&
                       Catch::Contains("overflows") && Catch::Contains("[1, 0, 0]"));
    CHECK(!fs::exists(d / "big_out.h5"));
  }
}

TEST_CASE("downsample: a CosmoFlow folder is replaced whole or not at all", "[downsample]") {
  Tmp d;
  fs::create_directories(d.dir / "cf");
  const Tensor lab = Tensor::full({2, 4}, 0.5f);
  write_cosmoflow_file(d / "cf/a.h5", from_float32(Tensor::full({2, 4, 4, 4, 4}, 2.f), DType::U16), lab);
  write_cosmoflow_file(d / "cf/b.h5", from_float32(Tensor::full({2, 4, 4, 4, 4}, 4.f), DType::U16), lab);
  DownsampleOptions o;
  o.axes = "x";
  REQUIRE(downsample_dataset(d / "cf", d / "out", o).files == 2);
  // The later file turns bad: a second run (--force, another factor) fails
  // on it and must leave both earlier outputs, not a mix of old and new.
  Tensor x = Tensor::full({2, 4, 4, 4, 4}, 1.f);
  x.data<float>()[300] = std::nanf("");
  write_cosmoflow_file(d / "cf/b.h5", x, lab);
  o.force = true;
  o.axes = "x,y,z";
  REQUIRE_THAT(err([&] { downsample_dataset(d / "cf", d / "out", o); }),
               Catch::Contains("b.h5") && Catch::Contains("non-finite"));
  for (const char* f : {"a.h5", "b.h5"})
    CHECK(CosmoFlowFiles::open(d / ("out/" + std::string(f))).dims() == std::array<int64_t, 3>{2, 4, 4});
  // A new folder gets no file at all (a.h5 was written before b.h5 failed).
  REQUIRE_THAT(err([&] { downsample_dataset(d / "cf", d / "fresh", o); }),
               Catch::Contains("b.h5") && Catch::Contains("non-finite"));
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(d.dir / "fresh")) files += e.is_regular_file();
  CHECK(files == 0);
}

TEST_CASE("downsample: .h5 files in --out that the input lacks are refused, or removed by --force", "[downsample]") {
  Tmp d;
  fs::create_directories(d.dir / "big/train");
  fs::create_directories(d.dir / "small/train");
  const Tensor lab = Tensor::full({2, 4}, 0.5f);
  const Tensor x = from_float32(Tensor::full({2, 4, 4, 4, 4}, 2.f), DType::U16);
  for (const char* f : {"big/train/a.h5", "big/train/b.h5", "big/train/c.h5", "small/train/a.h5"})
    write_cosmoflow_file(d / f, x, lab);
  DownsampleOptions o;
  o.axes = "x";
  REQUIRE(downsample_dataset(d / "big", d / "out", o).files == 3);
  // The smaller data set into the same folder: its b.h5 and c.h5 would be
  // read with the new a.h5 -- refused also where no file has its name.
  CHECK_THAT(err([&] { downsample_dataset(d / "small", d / "out", o); }), Catch::Contains("already exists"));
  fs::remove(d / "out/train/a.h5");
  const std::string m = err([&] { downsample_dataset(d / "small", d / "out", o); });
  INFO(m);
  CHECK_THAT(
      m, Catch::Contains("holds 2 .h5 file(s)") && Catch::Contains("(train/b.h5, ...)") && Catch::Contains("--force"));
  CHECK(fs::exists(d / "out/train/b.h5"));
  CHECK_FALSE(fs::exists(d / "out/train/a.h5"));
  // --force: the new file written, the others gone; nothing else touched.
  o.force = true;
  REQUIRE(downsample_dataset(d / "small", d / "out", o).files == 1);
  std::vector<std::string> left;
  for (const auto& e : fs::recursive_directory_iterator(d.dir / "out"))
    if (e.is_regular_file()) left.push_back(fs::relative(e.path(), d.dir / "out").string());
  CHECK(left == std::vector<std::string>{"train/a.h5"});
  CHECK(fs::exists(d / "big/train/c.h5"));
}

TEST_CASE("downsample: folders nested in each other, float64 labels, damaged extents", "[downsample]") {
  Tmp d;
  fs::create_directories(d.dir / "cf/train");
  Tensor l = Tensor::empty({2, 4}, DType::F64);
  for (int i = 0; i < 8; ++i) static_cast<double*>(l.raw_data())[i] = 0.125 * i;
  {
    H5File f = H5File::create(d / "cf/train/a.h5");
    f.write("3Dmap", from_float32(Tensor::full({2, 4, 4, 4, 4}, 2.f), DType::U16));
    f.write("unitPar", l);
    f.close();
  }
  DownsampleOptions o;
  o.axes = "x";
  // An output inside the input (it would hide the train split) or around it.
  for (const auto& [in, out] : {std::make_pair(d / "cf", d / "cf/train"), std::make_pair(d / "cf/train", d / "cf")}) {
    const std::string m = err([&] { downsample_dataset(in, out, o); });
    INFO(m);
    CHECK_THAT(m, Catch::Contains("must not lie one inside the other"));
  }
  // float64 labels: written as float32, the same values; a NaN among them is named.
  downsample_dataset(d / "cf", d / "half", o);
  const Batch b = CosmoFlowFiles::open(d / "half/train/a.h5").read(0, 0, 2);
  for (int i = 0; i < 8; ++i) CHECK(b.labels.data<float>()[i] == 0.125f * i);
  static_cast<double*>(l.raw_data())[6] = std::nan("");
  {
    H5File f = H5File::create(d / "cf/train/a.h5");
    f.write("3Dmap", from_float32(Tensor::full({2, 4, 4, 4, 4}, 2.f), DType::U16));
    f.write("unitPar", l);
    f.close();
  }
  CHECK_THAT(err([&] { downsample_dataset(d / "cf", d / "half2", o); }),
             Catch::Contains("'unitPar'") && Catch::Contains("non-finite") && Catch::Contains("[1, 2]"));
  // A header claiming an extent no size can be computed from (a damaged
  // file): a Data error naming file and dataset, not a wrapped allocation.
  {
    hid_t f = H5Fcreate((d / "huge.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t dims[3] = {1, hsize_t{1} << 62, 1}, chunk[3] = {1, 1024, 1};
    hid_t sp = H5Screate_simple(3, dims, nullptr), pl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(pl, 3, chunk);
    hid_t ds = H5Dcreate2(f, "train_frames", H5T_IEEE_F32LE, sp, H5P_DEFAULT, pl, H5P_DEFAULT);
    REQUIRE(ds >= 0);
    const hsize_t ldims[2] = {1, 19};
    hid_t lsp = H5Screate_simple(2, ldims, nullptr);
    H5Dclose(H5Dcreate2(f, "train_unitStar_par", H5T_IEEE_F32LE, lsp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Sclose(lsp);
    H5Dclose(ds);
    H5Pclose(pl);
    H5Sclose(sp);
    H5Fclose(f);
  }
  o.axes = "t";
  o.factor = 2;
  CHECK_THAT(err([&] { downsample_dataset(d / "huge.h5", d / "huge_out.h5", o); }),
             Catch::Contains("huge.h5") && Catch::Contains("'train_frames'") && Catch::Contains("too large"));
}

TEST_CASE("downsample: copies the files a loader reads, not every .h5 below the folder", "[downsample]") {
  // Every *.h5 below the folder was copied: a subfolder of older files of
  // another cube size made the whole copy refused, hidden temporaries were
  // copied, and a file in --out that no split reads blocked the copy.
  Tmp d;
  const Tensor lab = Tensor::full({2, 4}, 0.5f);
  const auto cube = [](int64_t a) { return from_float32(Tensor::full({2, a, a, a, 4}, 2.f), DType::U16); };
  for (const char* f : {"cf/train", "cf/val", "cf/old", "out/misc"}) fs::create_directories(d.dir / f);
  write_cosmoflow_file(d / "cf/train/a.h5", cube(4), lab);
  write_cosmoflow_file(d / "cf/val/a.h5", cube(4), lab);
  write_cosmoflow_file(d / "cf/train/.partial.h5", cube(8), lab);
  write_cosmoflow_file(d / "cf/old/a.h5", cube(8), lab);
  write_cosmoflow_file(d / "cf/stray.h5", cube(8), lab);  // beside split folders: no split's
  write_cosmoflow_file(d / "out/misc/z.h5", cube(8), lab);
  DownsampleOptions o;
  o.axes = "x,y,z";
  REQUIRE(downsample_dataset(d / "cf", d / "out", o).files == 2);
  std::vector<std::string> written;
  for (const auto& e : fs::recursive_directory_iterator(d.dir / "out"))
    if (e.is_regular_file()) written.push_back(fs::relative(e.path(), d.dir / "out").string());
  std::sort(written.begin(), written.end());
  CHECK(written == std::vector<std::string>{"misc/z.h5", "train/a.h5", "val/a.h5"});
  CHECK(H5File::open_read(d / "out/train/a.h5").shape("3Dmap") == std::vector<int64_t>{2, 2, 2, 2, 4});
  // A flat folder: the files directly in it, not those of its subfolders.
  fs::create_directories(d.dir / "flat/sub");
  write_cosmoflow_file(d / "flat/a.h5", cube(4), lab);
  write_cosmoflow_file(d / "flat/sub/b.h5", cube(8), lab);
  REQUIRE(downsample_dataset(d / "flat", d / "flat_half", o).files == 1);
  CHECK(fs::exists(d / "flat_half/a.h5"));
  CHECK_FALSE(fs::exists(d / "flat_half/sub"));
}

TEST_CASE("downsample: --out's own split folders: a stale one, a linked one, flat files beside them", "[downsample]") {
  // Session 58's review of the change above: only the folders the new files
  // went to were checked, so a stale test/ from an earlier data set was
  // kept and read; a linked split folder made --force delete the files it
  // had just written (fs::relative resolved the link).
  Tmp d;
  const Tensor lab = Tensor::full({2, 4}, 0.5f);
  const Tensor x = from_float32(Tensor::full({2, 4, 4, 4, 4}, 2.f), DType::U16);
  for (const char* f : {"a/train/x.h5", "a/val/x.h5", "a/test/x.h5", "b/train/y.h5", "b/val/y.h5", "flat/z.h5"}) {
    fs::create_directories((d.dir / f).parent_path());
    write_cosmoflow_file(d / f, x, lab);
  }
  DownsampleOptions o;
  o.axes = "x";
  REQUIRE(downsample_dataset(d / "a", d / "out", o).files == 3);
  // b has no test split: a's test/ would be read as b's.
  std::string m = err([&] { downsample_dataset(d / "b", d / "out", o); });
  CHECK_THAT(m, Catch::Contains("holds 3 .h5 file(s)") && Catch::Contains("test/x.h5"));
  o.force = true;
  REQUIRE(downsample_dataset(d / "b", d / "out", o).files == 2);
  CHECK_FALSE(fs::exists(d / "out/test"));  // emptied, so removed: no split reads an empty folder
  CHECK_FALSE(fs::exists(d / "out/train/x.h5"));
  CHECK(fs::exists(d / "out/train/y.h5"));
  // A split folder of --out that is a link: --force keeps what it writes.
  fs::create_directories(d.dir / "elsewhere/train");
  fs::create_directories(d.dir / "linked");
  fs::create_directory_symlink(d.dir / "elsewhere/train", d.dir / "linked/train");
  REQUIRE(downsample_dataset(d / "b", d / "linked", o).files == 2);
  REQUIRE(downsample_dataset(d / "b", d / "linked", o).files == 2);
  CHECK(fs::exists(d / "elsewhere/train/y.h5"));
  CHECK(fs::exists(d / "linked/val/y.h5"));
  // Flat files into a folder with split folders: the loader would read those.
  m = err([&] { downsample_dataset(d / "flat", d / "out", o); });
  CHECK_THAT(m, Catch::Contains("has split folders") && Catch::Contains("choose another --out"));
  CHECK_FALSE(fs::exists(d / "out/z.h5"));
}

TEST_CASE("downsample: split folders linked into the other tree are refused, the input untouched", "[downsample]") {
  // The folders' own check compared the two roots only: in/train ->
  // ../out/train, or out/test -> ../in/test, and --force replaced the
  // input files with their coarse copies (session 58's second review).
  Tmp d;
  const Tensor lab = Tensor::full({2, 4}, 0.5f);
  const Tensor x = from_float32(Tensor::full({2, 4, 4, 4, 4}, 2.f), DType::U16);
  for (const char* f : {"in/val/a.h5", "in/test/a.h5", "out/train/a.h5"}) {
    fs::create_directories((d.dir / f).parent_path());
    write_cosmoflow_file(d / f, x, lab);
  }
  fs::create_directory_symlink(d.dir / "out/train", d.dir / "in/train");
  DownsampleOptions o;
  o.axes = "x";
  o.force = true;
  std::string m = err([&] { downsample_dataset(d / "in", d / "out", o); });
  CHECK_THAT(m, Catch::Contains("lie in one folder through a link") && Catch::Contains("train/a.h5"));
  CHECK(H5File::open_read(d / "out/train/a.h5").shape("3Dmap") == std::vector<int64_t>{2, 4, 4, 4, 4});
  // The output's split folder a link into the input: its file would be
  // written (test/) or, as a stale file, removed by --force.
  fs::remove(d.dir / "in/train");
  fs::create_directories(d.dir / "out2");
  fs::create_directory_symlink(d.dir / "in/test", d.dir / "out2/test");
  m = err([&] { downsample_dataset(d / "in", d / "out2", o); });
  CHECK_THAT(m, Catch::Contains("lie in one folder through a link") && Catch::Contains("test/a.h5"));
  CHECK(H5File::open_read(d / "in/test/a.h5").shape("3Dmap") == std::vector<int64_t>{2, 4, 4, 4, 4});
  // A stale split of --out that is a link to an input split: --force would
  // remove the input's file as a file no counterpart of the input has.
  fs::remove(d.dir / "in/test/a.h5");
  fs::remove(d.dir / "in/test");
  fs::create_directories(d.dir / "out3");
  fs::create_directory_symlink(d.dir / "in/val", d.dir / "out3/test");
  m = err([&] { downsample_dataset(d / "in", d / "out3", o); });
  CHECK_THAT(m, Catch::Contains("out3/test/a.h5 is the input's") && Catch::Contains("through a link"));
  CHECK(fs::exists(d / "in/val/a.h5"));
}
