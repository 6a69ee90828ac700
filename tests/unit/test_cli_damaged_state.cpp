// Damaged checkpoint values that used to be taken as they were (session
// 57's probe): negative counts resumed "epoch -5" and dropped the run's
// metrics, a learning-rate scale of -1 trained with lr 0, integer weights
// (or a damaged float type) evaluated to MSE 1e54. And what a run says of
// its own set-up: a validation split read in part, labels the model does not
// predict.
#include <hdf5.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "support/cli_runner.h"

using namespace mrmf;
using namespace mrmf::clitest;

namespace {

// Rewrites scalar dataset `name` of checkpoint `path` as int64 `v`.
void set_count(const std::string& path, const char* name, int64_t v) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  REQUIRE(f >= 0);
  const hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  REQUIRE(d >= 0);
  REQUIRE(H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v) >= 0);
  H5Dclose(d);
  H5Fclose(f);
}

// Writes float64 attribute `name` of group `obj` anew.
void set_attr(const std::string& path, const char* obj, const char* name, double v) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  REQUIRE(f >= 0);
  // Deleted and made again (HDF5 1.10 fails to write some attributes in place).
  REQUIRE(H5Adelete_by_name(f, obj, name, H5P_DEFAULT) >= 0);
  const hid_t sp = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate_by_name(f, obj, name, H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  REQUIRE(a >= 0);
  REQUIRE(H5Awrite(a, H5T_NATIVE_DOUBLE, &v) >= 0);
  H5Aclose(a);
  H5Sclose(sp);
  H5Fclose(f);
}

// Replaces the first 2-D weight under /model with the same values as uint8.
std::string weights_as_uint8(const std::string& path) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  REQUIRE(f >= 0);
  const hid_t g = H5Gopen2(f, "model", H5P_DEFAULT);
  H5G_info_t info;
  REQUIRE(H5Gget_info(g, &info) >= 0);
  std::string name;
  for (hsize_t i = 0; i < info.nlinks && name.empty(); ++i) {
    char buf[256] = {};
    H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, buf, sizeof buf, H5P_DEFAULT);
    const hid_t d = H5Dopen2(g, buf, H5P_DEFAULT);
    const hid_t sp = H5Dget_space(d);
    if (H5Sget_simple_extent_ndims(sp) == 2) name = buf;
    H5Sclose(sp);
    H5Dclose(d);
  }
  REQUIRE_FALSE(name.empty());
  const hid_t d = H5Dopen2(g, name.c_str(), H5P_DEFAULT);
  const hid_t sp = H5Dget_space(d);
  H5Dclose(d);
  REQUIRE(H5Ldelete(g, name.c_str(), H5P_DEFAULT) >= 0);
  const hid_t nd = H5Dcreate2(g, name.c_str(), H5T_STD_U8LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  REQUIRE(nd >= 0);
  H5Dclose(nd);
  H5Sclose(sp);
  H5Gclose(g);
  H5Fclose(f);
  return "model/" + name;
}

// Writes root string attribute `name` of `path` anew (fixed-length).
void set_root_string(const std::string& path, const char* name, const std::string& v) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  REQUIRE(f >= 0);
  REQUIRE(H5Adelete(f, name) >= 0);
  const hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, v.size() + 1);
  const hid_t sp = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate2(f, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
  REQUIRE(H5Awrite(a, t, v.c_str()) >= 0);
  H5Aclose(a);
  H5Sclose(sp);
  H5Tclose(t);
  H5Fclose(f);
}

}  // namespace

TEST_CASE("cli: eval reads a checkpoint's input_layout in each of its spellings", "[cli]") {
  // scripts/torch_state_dict.py stores "reinterpret_view" as given: eval
  // took every value but "view" for transpose (session 57's review).
  SKIP_WITHOUT_BINARY();
  Scratch s;
  const std::string data = (s.dir / "ni.h5").string();
  make_tiny_ni(data, " --train 64 --val 32 --test 32 --time-bins 64 --seed 6");
  const std::string cfg = write_config(s.dir, data), out = (s.dir / "run").string();
  REQUIRE(
      run("train --config " + cfg + " --out " + out + " --set stop.max_epochs=1 --set data.layout=reinterpret").code ==
      0);
  const std::string ck = out + "/checkpoint.h5",
                    eval = "eval --data " + data + " --split test --json --checkpoint " + ck;
  const Result view = run_stdout(eval);
  REQUIRE(view.code == 0);
  // (write_config's model options, input_layout spelled the other way.)
  set_root_string(ck, "model_options",
                  "conv_channels=8,16,16\nfc=32,32\ninput_layout=reinterpret_view\nkernel=3\npool=2\n");
  const Result spelled = run_stdout(eval);
  INFO(spelled.out);
  REQUIRE(spelled.code == 0);
  CHECK(nlohmann::json::parse(spelled.out)["mse"] == nlohmann::json::parse(view.out)["mse"]);
  CHECK(run(eval + " --set data.layout=reinterpret").code == 0);
  CHECK(run(eval + " --set data.layout=transpose").code == 2);
}

TEST_CASE("cli: damaged checkpoint counts and types are refused by name", "[cli]") {
  SKIP_WITHOUT_BINARY();
  Scratch s;
  const std::string data = (s.dir / "ni.h5").string();
  // 72 validation samples: whole batches of 32 read 64 of them.
  make_tiny_ni(data, " --train 128 --val 72 --test 32 --time-bins 64 --seed 5");
  const std::string cfg = write_config(s.dir, data), out = (s.dir / "run").string();
  Result r = run("train --config " + cfg + " --out " + out + " --set stop.max_epochs=1");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("the validation loss is taken over 64 of the val split's 72 samples"));
  // Labels the model does not predict: named as the key, before training.
  r = run("train --config " + cfg + " --out " + (s.dir / "o5").string() + " --set model.options.outputs=5");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("the model predicts 5 values (config key 'model.options.outputs') but the data "
                                    "have 19 labels per sample"));

  const std::string ck = out + "/checkpoint.h5", copy = (s.dir / "ck.h5").string();
  const std::string eval = "eval --data " + data + " --split test --checkpoint " + copy;
  const auto fresh = [&] { std::filesystem::copy_file(ck, copy, std::filesystem::copy_options::overwrite_existing); };
  fresh();
  REQUIRE(run(eval).code == 0);
  set_count(copy, "epoch", -5);
  r = run(eval);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("ck.h5: epoch -5 and step") && Catch::Contains("must not be negative"));
  fresh();
  const std::string ds = weights_as_uint8(copy);
  r = run(eval);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("dataset '" + ds + "' has element type uint8 that is not an IEEE float"));
  // A learning-rate scale outside (0, 1] (ReduceLROnPlateau's state) on --resume.
  r = run("train --config " + cfg + " --out " + out + " --set stop.max_epochs=2 --set schedule.type=plateau --force");
  REQUIRE(r.code == 0);
  set_attr(ck, "scheduler", "scale", -1.0);
  r = run("train --config " + cfg + " --out " + out + " --set stop.max_epochs=3 --set schedule.type=plateau --resume");
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("the learning-rate schedule's state: 'scale' is -1, expected a factor in (0, 1]"));
}
