// Datasets whose values HDF5 would make up: storage never written, a virtual
// dataset's missing source or unmapped region, an external raw file shorter
// than the dataset -- all read as the fill value (zeros) without an error,
// and trained on (session 57's probe). Also bfloat16 frames (read as
// float16, they lost range and digits) and the files behind a file's links
// (an output named like one was replaced by --force).
#include <hdf5.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/error.h"
#include "data/formats.h"
#include "data/h5file.h"
#include "support/format_fixtures.h"
#include "support/temp_dir.h"

using namespace mrmf;
using namespace mrmf::data;
using namespace mrmf::test::formats;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kN = 4, kT = 8, kC = 3;

// Labels of every split and the frames of val and test, written whole; the
// train frames are left to `make_train_frames`, which gets the open file.
template <typename F>
void write_ni_with(const std::string& path, F make_train_frames) {
  {
    H5File f = H5File::create(path);
    for (Split s : kAllSplits) {
      f.write(NeuronInverterFile::labels_name(s), iota({kN, 19}, DType::F32, 0.01f));
      if (s != Split::Train) f.write(NeuronInverterFile::frames_name(s), iota({kN, kT, kC}, DType::F32, 0.5f));
    }
    f.close();
  }
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  REQUIRE(f >= 0);
  make_train_frames(f);
  REQUIRE(H5Fclose(f) >= 0);
}

std::vector<float> frame_values() {
  std::vector<float> v(static_cast<size_t>(kN * kT * kC));
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.5f * static_cast<float>(i) - 7.f;
  return v;
}

// The train frames as a dataset created with `dcpl` (of `type`) and written
// with `values`, or left unwritten.
void frames(hid_t f, hid_t dcpl, hid_t type = H5T_IEEE_F32LE, const float* values = nullptr) {
  const hsize_t dims[3] = {kN, kT, kC};
  const hid_t space = H5Screate_simple(3, dims, nullptr);
  const hid_t d = H5Dcreate2(f, "train_frames", type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  REQUIRE(d >= 0);
  if (values) REQUIRE(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) >= 0);
  H5Dclose(d);
  H5Sclose(space);
}

std::string open_error(const std::string& path) {
  try {
    (void)NeuronInverterFile::open(path, {Split::Train});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("h5 storage: frames never written or partly written are refused by name", "[data][h5]") {
  test::TempDir dir("mrmf_h5st");
  const std::string never = dir.file("never.h5"), part = dir.file("part.h5");
  write_ni_with(never, [](hid_t f) { frames(f, H5P_DEFAULT); });
  CHECK_THAT(open_error(never),
             Contains("never.h5: dataset 'train_frames': it was never written") && Contains("fill value (zeros)"));
  // Chunked, one sample a chunk, the first two written (a writer that died).
  write_ni_with(part, [](hid_t f) {
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    const hsize_t chunk[3] = {1, kT, kC};
    H5Pset_chunk(dcpl, 3, chunk);
    H5Pset_deflate(dcpl, 4);  // compressed chunks: H5Dget_space_status calls these "partly allocated"
    frames(f, dcpl);
    const hid_t d = H5Dopen2(f, "train_frames", H5P_DEFAULT);
    const hid_t fs_ = H5Dget_space(d);
    const hsize_t start[3] = {0, 0, 0}, count[3] = {2, kT, kC};
    H5Sselect_hyperslab(fs_, H5S_SELECT_SET, start, nullptr, count, nullptr);
    const hid_t ms = H5Screate_simple(3, count, nullptr);
    const auto v = frame_values();
    REQUIRE(H5Dwrite(d, H5T_NATIVE_FLOAT, ms, fs_, H5P_DEFAULT, v.data()) >= 0);
    H5Sclose(ms);
    H5Sclose(fs_);
    H5Dclose(d);
    H5Pclose(dcpl);
  });
  CHECK_THAT(open_error(part), Contains("dataset 'train_frames': only 2 of its 4 chunks were ever written"));
  // The same, every chunk written (compressed, and with a partial edge
  // chunk), opens.
  const std::string whole = dir.file("whole.h5");
  write_ni_with(whole, [](hid_t f) {
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    const hsize_t chunk[3] = {3, 5, kC};
    H5Pset_chunk(dcpl, 3, chunk);
    H5Pset_deflate(dcpl, 4);
    const auto v = frame_values();
    frames(f, dcpl, H5T_IEEE_F32LE, v.data());
    H5Pclose(dcpl);
  });
  CHECK(open_error(whole).empty());
}

TEST_CASE("h5 storage: external raw files missing or short are refused and whole ones read", "[data][h5]") {
  test::TempDir dir("mrmf_h5st");
  const auto v = frame_values();
  const size_t bytes = v.size() * sizeof(float);
  const std::string raw = dir.file("frames.bin"), path = dir.file("ext.h5");
  write_ni_with(path, [&](hid_t f) {
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_external(dcpl, raw.c_str(), 0, bytes);  // absolute: independent of the current folder
    frames(f, dcpl, H5T_IEEE_F32LE, v.data());
    H5Pclose(dcpl);
  });
  {
    const NeuronInverterFile nf = NeuronInverterFile::open(path, {Split::Train});
    Batch b = nf.read(Split::Train, 0, kN);
    CHECK(std::memcmp(b.frames.raw_data(), v.data(), bytes) == 0);
  }
  fs::resize_file(raw, bytes / 2);  // HDF5 would read the missing half as zeros
  CHECK_THAT(open_error(path),
             Contains("its external raw file '" + raw + "'") &&
                 Contains("holds " + std::to_string(bytes / 2) + " bytes, the dataset needs " + std::to_string(bytes)));
  fs::remove(raw);
  CHECK_THAT(open_error(path), Contains("does not exist") && Contains("HDF5_EXTFILE_PREFIX"));
}

TEST_CASE("h5 storage: a virtual dataset's missing source or unmapped part is refused", "[data][h5]") {
  test::TempDir dir("mrmf_h5st");
  const auto v = frame_values();
  const std::string src = dir.file("src.h5");
  {
    H5File s = H5File::create(src);
    Tensor t = Tensor::empty({kN, kT, kC}, DType::F32);
    std::memcpy(t.raw_data(), v.data(), v.size() * sizeof(float));
    s.write("frames", t);
    s.close();
  }
  // Maps rows [0, rows) of `file`'s "frames" onto the same rows.
  const auto vds = [&](const std::string& path, const std::string& file, hsize_t rows) {
    write_ni_with(path, [&](hid_t f) {
      const hsize_t dims[3] = {kN, kT, kC}, start[3] = {0, 0, 0}, count[3] = {rows, kT, kC};
      const hid_t vspace = H5Screate_simple(3, dims, nullptr), sspace = H5Screate_simple(3, dims, nullptr);
      H5Sselect_hyperslab(vspace, H5S_SELECT_SET, start, nullptr, count, nullptr);
      H5Sselect_hyperslab(sspace, H5S_SELECT_SET, start, nullptr, count, nullptr);
      const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
      REQUIRE(H5Pset_virtual(dcpl, vspace, file.c_str(), "frames", sspace) >= 0);
      frames(f, dcpl);
      H5Pclose(dcpl);
      H5Sclose(vspace);
      H5Sclose(sspace);
    });
  };
  const std::string good = dir.file("good.h5"), half = dir.file("half.h5"), lost = dir.file("lost.h5");
  vds(good, src, kN);
  {
    const NeuronInverterFile nf = NeuronInverterFile::open(good, {Split::Train});
    Batch b = nf.read(Split::Train, 0, kN);
    CHECK(std::memcmp(b.frames.raw_data(), v.data(), v.size() * sizeof(float)) == 0);
  }
  vds(half, src, kN / 2);
  CHECK_THAT(open_error(half), Contains("its virtual mappings cover " + std::to_string(kN / 2 * kT * kC) + " of its " +
                                        std::to_string(kN * kT * kC) + " elements"));
  vds(lost, dir.file("gone.h5"), kN);
  CHECK_THAT(open_error(lost), Contains("its virtual mapping 0 (dataset 'frames' of '" + dir.file("gone.h5") +
                                        "') names a file that does not exist"));
  // A source whose own storage was never written: found through the mapping.
  const std::string empty_src = dir.file("empty_src.h5"), via = dir.file("via.h5");
  {
    H5File s = H5File::create(empty_src);
    s.create_dataset("frames", {kN, kT, kC}, DType::F32);
    s.close();
  }
  vds(via, empty_src, kN);
  CHECK_THAT(open_error(via), Contains("its virtual mapping 0") && Contains("it was never written"));
}

TEST_CASE("h5 storage: a virtual dataset behind an external link resolves from its own file", "[data][h5]") {
  // view/view.h5 links to ../other/vds.h5, whose virtual dataset maps the
  // relative "src.h5" beside it: the check looked for view/src.h5 and
  // refused a file HDF5 reads (a review's case, session 57).
  test::TempDir dir("mrmf_h5st");
  fs::create_directories(dir.dir / "other");
  fs::create_directories(dir.dir / "view");
  {
    H5File s = H5File::create((dir.dir / "other" / "src.h5").string());
    s.write("x", iota({4, 3}, DType::F32, 1.f));
    s.close();
  }
  const std::string vds = (dir.dir / "other" / "vds.h5").string(), view = (dir.dir / "view" / "view.h5").string();
  {
    const hid_t f = H5Fcreate(vds.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t dims[2] = {4, 3};
    const hid_t space = H5Screate_simple(2, dims, nullptr);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    REQUIRE(H5Pset_virtual(dcpl, space, "src.h5", "x", space) >= 0);
    H5Dclose(H5Dcreate2(f, "v", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Fclose(f);
    const hid_t g = H5Fcreate(view.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(H5Lcreate_external("../other/vds.h5", "v", g, "v", H5P_DEFAULT, H5P_DEFAULT) >= 0);
    H5Fclose(g);
  }
  const H5File f = H5File::open_read(view);
  CHECK_FALSE(f.unstored_part("v").has_value());
  const Tensor t = f.read("v", DType::F32);
  CHECK(t.data<float>()[11] == Approx(11.f));
}

TEST_CASE("h5 storage: bfloat16 frames read as float32 exactly and IEEE half of either byte order as float16",
          "[data][h5]") {
  test::TempDir dir("mrmf_h5st");
  // Values bfloat16 holds exactly, beyond float16's range and below its
  // resolution: read as float16 they became inf or lost digits.
  std::vector<float> v(static_cast<size_t>(kN * kT * kC));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = (i % 2 ? -448512.f : 4.470348358154297e-07f) * static_cast<float>(i % 5 + 1);
  const std::string path = dir.file("bf16.h5");
  write_ni_with(path, [&](hid_t f) {
    const hid_t bf16 = H5Tcopy(H5T_IEEE_F32LE);
    H5Tset_fields(bf16, 15, 7, 8, 0, 7);
    H5Tset_size(bf16, 2);
    H5Tset_ebias(bf16, 127);
    frames(f, H5P_DEFAULT, bf16, v.data());
    H5Tclose(bf16);
  });
  const NeuronInverterFile nf = NeuronInverterFile::open(path, {Split::Train});
  CHECK(nf.info(Split::Train).dtype == DType::F32);
  Batch b = nf.read(Split::Train, 0, kN);
  const float* got = static_cast<const float*>(b.frames.raw_data());
  for (size_t i = 0; i < v.size(); ++i) {
    // bfloat16 keeps the top 16 bits of a float32 (round to nearest).
    uint32_t bits;
    std::memcpy(&bits, &v[i], 4);
    bits = (bits + 0x7fff + ((bits >> 16) & 1)) & 0xffff0000u;
    float want;
    std::memcpy(&want, &bits, 4);
    REQUIRE(got[i] == want);
  }
  // float16 big-endian is float16.
  const std::string be = dir.file("f16be.h5");
  write_ni_with(be, [&](hid_t f) {
    const hid_t half = H5Tcopy(H5T_IEEE_F32BE);
    H5Tset_fields(half, 15, 10, 5, 0, 10);
    H5Tset_size(half, 2);
    H5Tset_ebias(half, 15);
    const auto fv = frame_values();
    frames(f, H5P_DEFAULT, half, fv.data());
    H5Tclose(half);
  });
  CHECK(NeuronInverterFile::open(be, {Split::Train}).info(Split::Train).dtype == DType::F16);
}

TEST_CASE("h5 storage: the files behind a file (external links and VDS sources and raw files)", "[data][h5]") {
  test::TempDir dir("mrmf_h5st");
  const std::string target = dir.file("target.h5"), raw = dir.file("raw.bin"), src = dir.file("vsrc.h5");
  {
    H5File t = H5File::create(target);
    t.write("x", iota({2, 2}, DType::F32, 1.f));
    t.close();
    H5File s = H5File::create(src);
    s.write("x", iota({2, 2}, DType::F32, 1.f));
    s.close();
    std::ofstream(raw, std::ios::binary) << std::string(16, '\0');
  }
  const std::string view = dir.file("view.h5");
  {
    const hid_t f = H5Fcreate(view.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(H5Lcreate_external("target.h5", "x", f, "linked", H5P_DEFAULT, H5P_DEFAULT) >= 0);  // relative
    const hsize_t dims[2] = {2, 2};
    const hid_t space = H5Screate_simple(2, dims, nullptr);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_external(dcpl, raw.c_str(), 0, 16);
    H5Dclose(H5Dcreate2(f, "ext", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
    H5Pclose(dcpl);
    dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_virtual(dcpl, space, src.c_str(), "x", space);
    H5Dclose(H5Dcreate2(f, "virt", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Fclose(f);
  }
  const auto behind = files_behind(view);
  const auto has = [&](const std::string& p) {
    return std::any_of(behind.begin(), behind.end(), [&](const std::string& b) { return fs::equivalent(b, p); });
  };
  CHECK(behind.size() == 3);
  CHECK(has(target));
  CHECK(has(raw));
  CHECK(has(src));
  CHECK(files_behind(target).empty());
  CHECK(files_behind(dir.file("nothing.h5")).empty());
  CHECK(files_behind(raw).empty());  // not HDF5
}
