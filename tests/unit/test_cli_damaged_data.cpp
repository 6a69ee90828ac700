// Damaged user data files (no checksums: the originals' layouts, h5py's
// default format), as session 59's fuzzing of `downsample`, `eval` and
// `train` found them: an element type whose bit fields do not fit its
// bytes made libhdf5's conversion smash its stack, and damaged metadata
// addresses made libhdf5 read wild memory -- crashes that named no file.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/cli_runner.h"

using namespace mrmf;
using namespace mrmf::clitest;

namespace {

// Overwrites `bytes.size()` bytes of `path` at `offset`.
void poke(const fs::path& path, size_t offset, const std::string& bytes) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  REQUIRE(f.good());
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(f.good());
}

}  // namespace

TEST_CASE("cli: a data set whose element type is damaged is an error naming the file and dataset", "[cli][data]") {
  SKIP_WITHOUT_BINARY();
  Scratch s;
  const fs::path cf = s.dir / "cf";
  Result r = run("datagen cosmoflow --out " + cf.string() + " --size 16 --train 4 --val 4 --test 4 --per-file 4");
  INFO(r.out);
  REQUIRE(r.code == 0);
  fs::path file;
  for (const auto& e : fs::directory_iterator(cf / "train")) file = e.path();
  REQUIRE(!file.empty());
  // 3Dmap's datatype message: version 1 fixed-point, little-endian
  // unsigned, 2 bytes, bit offset 0, precision 16. Its precision byte
  // becomes 239 (a single byte inverted, as the fuzzing found it).
  const std::string bytes = slurp(file);
  const std::string u16_type("\x10\x00\x00\x00\x02\x00\x00\x00\x00\x00\x10\x00", 12);
  const size_t at = bytes.find(u16_type);
  REQUIRE(at != std::string::npos);
  REQUIRE(bytes.find(u16_type, at + 1) == std::string::npos);  // the one uint16 dataset
  poke(file, at + 10, "\xef");
  for (const std::string& cmd :
       {"downsample --in " + cf.string() + " --out " + (s.dir / "half").string() + " --factor 2 --axes x,y,z",
        "train --config " + write_config(s.dir, cf.string()) +
            " --set data.format=cosmoflow --set model.name=cosmoflow --out " + (s.dir / "run").string()}) {
    r = run(cmd);
    INFO(cmd << "\n" << r.out);
    CHECK(r.code == 1);
    CHECK_THAT(r.out, Catch::Contains(file.string() + ": dataset '3Dmap' has element type uint16 with 239-bit "
                                                      "precision at bit offset 0 in a 16-bit type (damaged)"));
  }
}

TEST_CASE("cli: a crash inside libhdf5 on a damaged file names the file", "[cli][data]") {
  SKIP_WITHOUT_BINARY();
  Scratch s;
  const fs::path data = s.dir / "ni.h5";
  make_tiny_ni(data.string(), " --train 64 --val 32 --test 32 --seed 1 --time-bins 128 --threads 1");
  // 8 bytes of 0xFF in the root group's symbol-table entry (an address of
  // its cached B-tree / local heap; where it lies in the version-0
  // superblock layout h5py-style files use): libhdf5 1.10.8 copies from a
  // wild address.
  // Another libhdf5 may report it instead; either way the file is named.
  poke(data, 128, std::string(8, '\xff'));
  const Result r =
      run("downsample --in " + data.string() + " --out " + (s.dir / "half.h5").string() + " --factor 2 --axes t");
  INFO(r.out);
  CHECK(r.code != 0);
  CHECK_THAT(r.out, Catch::Contains(data.string()));
  if (r.code >= 128)
    CHECK_THAT(r.out, Catch::Contains("The last HDF5 file this process opened for reading is " + data.string()) &&
                          Catch::Contains("libhdf5 crashes on some damaged files"));
  CHECK_FALSE(fs::exists(s.dir / "half.h5"));
}
