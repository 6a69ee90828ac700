// A damaged checkpoint is an error, not a different model: every tensor
// carries a Fletcher-32 checksum and every header (attributes, scalars, the
// config text) the checksum of HDF5 1.10's format. Before, a changed byte in
// a weight, a counter or the config text was read as the new value: the
// range and type checks catch only what is impossible, not what is wrong.
#include <hdf5.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <vector>

#include "core/check_hdf5.h"
#include "data/h5file.h"
#include "fusion/checkpoint.h"
#include "optim/adam.h"
#include "support/file_bytes.h"
#include "support/format_fixtures.h"
#include "support/temp_dir.h"

using namespace mrmf;

namespace {

// Adds 1 to the byte at `offset` of `path`.
void bump_byte(const std::string& path, uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  REQUIRE(f);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c + 1);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
  REQUIRE(f);
}

// The file offset of `bytes`, which must occur exactly once in `path`.
uint64_t unique_offset(const std::string& path, const std::string& bytes) {
  const std::string all = testing::file_bytes(path);
  const size_t at = all.find(bytes);
  REQUIRE(at != std::string::npos);
  REQUIRE(all.find(bytes, at + 1) == std::string::npos);
  return at;
}

// The file address of chunked dataset `ds`'s first chunk.
uint64_t first_chunk_address(const std::string& path, const std::string& ds) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  REQUIRE(f >= 0);
  const hid_t d = H5Dopen2(f, ds.c_str(), H5P_DEFAULT);
  REQUIRE(d >= 0);
  hsize_t offset[8] = {};
  unsigned mask = 0;
  haddr_t addr = 0;
  hsize_t size = 0;
  const hid_t sp = H5Dget_space(d);  // (H5S_ALL fails in HDF5 1.10.8)
  REQUIRE(H5Dget_chunk_info(d, sp, 0, offset, &mask, &addr, &size) >= 0);
  H5Sclose(sp);
  H5Dclose(d);
  H5Fclose(f);
  REQUIRE(size > 64);
  return addr;
}

bool has_fletcher32(const std::string& path, const std::string& ds) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t d = H5Dopen2(f, ds.c_str(), H5P_DEFAULT);
  const hid_t dcpl = H5Dget_create_plist(d);
  unsigned flags = 0;
  size_t nelem = 0;
  const bool has = H5Pget_filter_by_id2(dcpl, H5Z_FILTER_FLETCHER32, &flags, &nelem, nullptr, 0, nullptr, nullptr) >= 0;
  H5Eclear2(H5E_DEFAULT);
  H5Pclose(dcpl);
  H5Dclose(d);
  H5Fclose(f);
  return has;
}

const ModelSpec kSpec{"neuron_inverter", "", Shape{3, 400}, {{"fc", "64,32"}}};

// A checkpoint with optimizer state, a counter and a config text that can be
// found in the file's bytes.
std::string save_one(test::TempDir& tmp) {
  auto model = build_model(kSpec);
  model->build(Device::cpu(), 7, default_init_scheme(kSpec));
  Adam adam(model->params());
  TrainingState ts;
  ts.epoch = 3;
  ts.step = 12;
  ts.state["marker_count"] = int64_t{0x5a5a5a5a5a5a5a5a};
  ts.config = "note: the-marker-text-of-this-config\n";
  const std::string path = tmp.file("ckpt.h5");
  save_checkpoint(path, kSpec, *model, &adam, nullptr, ts);
  return path;
}

}  // namespace

TEST_CASE("checkpoint damage: a changed weight byte fails the read by its checksum", "[checkpoint]") {
  test::TempDir tmp("mrmf_ckpt_damage");
  const std::string path = save_one(tmp);
  const std::string ds = "model/fc_block.0.weight";
  REQUIRE(has_fletcher32(path, ds));
  REQUIRE(has_fletcher32(path, "optimizer/exp_avg/" + ds.substr(6)));
  REQUIRE_NOTHROW(load_model_from_checkpoint(path, Device::cpu()));

  bump_byte(path, first_chunk_address(path, ds) + 100);
  const std::string msg = test::formats::data_error([&] { load_model_from_checkpoint(path, Device::cpu()); });
  CHECK_THAT(msg, Catch::Contains(path) && Catch::Contains(ds) && Catch::Contains("Fletcher32 checksum"));

  // The control: the same change in a dataset written without a checksum is
  // read back as a different number, with no error.
  const std::string plain = tmp.file("plain.h5");
  {
    auto f = data::H5File::create(plain);
    Tensor t = Tensor::empty(Shape{64, 16});
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 0.25f * static_cast<float>(i);
    f.write("w", t);
  }
  const hid_t fid = H5Fopen(plain.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t did = H5Dopen2(fid, "w", H5P_DEFAULT);
  const haddr_t at = H5Dget_offset(did);
  H5Dclose(did);
  H5Fclose(fid);
  REQUIRE(at != HADDR_UNDEF);
  bump_byte(plain, at + 403);  // a high byte of element 100 (25.0f)
  const Tensor back = data::H5File::open_read(plain).read("w");
  CHECK(back.data<float>()[100] != 25.0f);
}

TEST_CASE("checkpoint damage: a changed counter or config byte fails by the header checksum", "[checkpoint]") {
  test::TempDir tmp("mrmf_ckpt_damage");
  const std::string path = save_one(tmp);
  // HDF5 1.10's format: superblock version 3 (2 and later carry checksums).
  {
    auto f = data::H5File::open_read(path);
    H5F_info2_t info;
    REQUIRE(H5Fget_info2(f.id(), &info) >= 0);
    CHECK(info.super.version >= 3);
  }
  const std::string saved = testing::file_bytes(path);
  const auto restore = [&] {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << saved;
  };

  const std::string text = "the-marker-text-of-this-config";
  bump_byte(path, unique_offset(path, text) + 4);
  std::string msg = test::formats::data_error([&] { read_checkpoint_header(path); });
  CHECK_THAT(msg, Catch::Contains(path) && Catch::Contains("checksum"));

  restore();
  REQUIRE(read_checkpoint_header(path).training.config.find(text) != std::string::npos);
  const int64_t marker = 0x5a5a5a5a5a5a5a5a;
  bump_byte(path, unique_offset(path, std::string(reinterpret_cast<const char*>(&marker), 8)) + 2);
  msg = test::formats::data_error([&] { read_checkpoint_header(path); });
  CHECK_THAT(msg, Catch::Contains(path) && Catch::Contains("checksum"));
}

TEST_CASE("checkpoint damage: no single changed byte of a checksummed file reads as other values", "[checkpoint]") {
  // Every byte of a small file written as checkpoints are (a tensor, a
  // compact scalar and string, attributes), changed in turn: each read
  // either fails with an error or returns exactly what was written. In 1.8's
  // format 22 bytes of such a file (its chunk B-tree, which has no checksum)
  // hid the tensor's chunk, and it read as zeros with no error.
  test::TempDir tmp("mrmf_ckpt_damage");
  const std::string path = tmp.file("small.h5");
  Tensor w = Tensor::empty(Shape{8, 6});
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = 1.5f + static_cast<float>(i);
  {
    auto f = data::H5File::create(path, /*checksummed=*/true);
    data::WriteOptions o;
    o.checksum = true;
    f.write("w", w, o);
    f.write_string("text", "some configuration text");
    f.write_string_attribute("w", "group", "bottom");
    // More than 8 links and attributes: HDF5's default moves them out of
    // the object header into a fractal heap, where a changed byte made
    // libhdf5 abort in free() (a checkpoint's /state group).
    f.create_group("state");
    for (int i = 0; i < 12; ++i) {
      f.write("state/k" + std::to_string(i), Tensor::full({1}, static_cast<float>(i)), o);
      f.write_string_attribute("state", "a" + std::to_string(i), "v" + std::to_string(i));
    }
    f.close();
  }
  // The names in `group` by index, as a checkpoint reader lists them.
  const auto names = [](const data::H5File& f, const char* group) {
    std::vector<std::string> out;
    H5G_info_t info;
    MRMF_H5_CHECK(H5Gget_info_by_name(f.id(), group, &info, H5P_DEFAULT));
    for (hsize_t i = 0; i < info.nlinks; ++i) {
      char buf[64] = {};
      MRMF_H5_CHECK(H5Lget_name_by_idx(f.id(), group, H5_INDEX_NAME, H5_ITER_INC, i, buf, sizeof buf, H5P_DEFAULT));
      out.push_back(buf);
    }
    return out;
  };
  const std::string saved = testing::file_bytes(path);
  int errors = 0, same = 0;
  std::vector<size_t> different;
  for (size_t at = 0; at < saved.size(); ++at) {
    {
      std::string d = saved;
      d[at] = static_cast<char>(d[at] + 1);
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out << d;
    }
    try {
      auto f = data::H5File::open_read(path);
      const Tensor r = f.read("w");
      const std::string text = f.read_string("text");
      const auto attr = f.read_string_attribute("w", "group");
      bool state_same = names(f, "state").size() == 12;
      for (int i = 0; i < 12; ++i) {
        const std::string k = std::to_string(i);
        state_same = state_same && f.read("state/k" + k).data<float>()[0] == static_cast<float>(i) &&
                     f.read_string_attribute("state", "a" + k) == std::optional<std::string>("v" + k);
      }
      if (r.shape() == w.shape() && std::memcmp(r.raw_data(), w.raw_data(), w.nbytes()) == 0 &&
          text == "some configuration text" && attr == std::optional<std::string>("bottom") && state_same)
        ++same;
      else
        different.push_back(at);
    } catch (const Error&) {
      ++errors;
    }
  }
  INFO("file of " << saved.size() << " bytes: " << errors << " errors, " << same << " unchanged reads");
  CHECK(different.empty());
  CHECK(errors > static_cast<int>(saved.size()) / 4);
}

TEST_CASE("checkpoint damage: a config text beyond the compact limit is checksummed too", "[checkpoint]") {
  test::TempDir tmp("mrmf_ckpt_damage");
  auto model = build_model(kSpec);
  model->build(Device::cpu(), 7, default_init_scheme(kSpec));
  TrainingState ts;
  ts.config = "data:\n  train_files: '";
  for (int i = 0; i < 3000; ++i) ts.config += "/scratch/cosmo/file_" + std::to_string(i) + ".h5,";
  ts.config += "'\n";
  REQUIRE(ts.config.size() > 40000);
  const std::string path = tmp.file("big.h5");
  save_checkpoint(path, kSpec, *model, nullptr, nullptr, ts);
  REQUIRE(read_checkpoint_header(path).training.config == ts.config);
  // A scalar, as h5py reads the short ones (f['config'][()] is bytes).
  {
    auto f = data::H5File::open_read(path);
    CHECK(f.shape("config").empty());
  }
  bump_byte(path, unique_offset(path, "file_2999.h5"));
  const std::string msg = test::formats::data_error([&] { read_checkpoint_header(path); });
  CHECK_THAT(msg, Catch::Contains(path) && Catch::Contains("checksum"));
}

TEST_CASE("checkpoint damage: a damaged attribute header is named, not taken for a missing attribute", "[checkpoint]") {
  // H5Aexists_by_name fails on a header whose checksum fails; read as "no
  // such attribute", --resume said "an unnamed optimizer state".
  test::TempDir tmp("mrmf_ckpt_damage");
  const std::string path = save_one(tmp);
  const double beta2 = static_cast<double>(AdamOptions{}.beta2);  // an attribute of /optimizer
  bump_byte(path, unique_offset(path, std::string(reinterpret_cast<const char*>(&beta2), 8)) + 3);
  auto model = build_model(kSpec);
  model->build(Device::cpu(), 7, default_init_scheme(kSpec));
  Adam adam(model->params());
  const std::string msg = test::formats::data_error([&] { load_optimizer_state(path, adam); });
  CHECK_THAT(msg, Catch::Contains(path) && Catch::Contains("checksum") && Catch::Contains("damaged"));
}
