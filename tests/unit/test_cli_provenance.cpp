// Which build made a result: `mrmf --version` names the version and the git
// commit (core/version.h), and a run's summary.json and checkpoint, and an
// experiment's summary.json and report.md, record the same text.
#include <hdf5.h>

#include <catch2/catch.hpp>
#include <regex>
#include <string>

#include "data/h5file.h"
#include "support/cli_runner.h"

using namespace mrmf::clitest;

TEST_CASE("cli: the version and commit of the build are in --version and in what a run writes", "[cli][provenance]") {
  SKIP_WITHOUT_BINARY();
  Result r = run("--version");
  INFO(r.out);
  REQUIRE(r.code == 0);
  std::smatch m;
  const std::string first = r.out.substr(0, r.out.find('\n'));
  // "unknown" outside a git checkout, "-dirty" with changed tracked files.
  REQUIRE(std::regex_match(
      first, m, std::regex(R"(mrmf ([0-9]+\.[0-9]+\.[0-9]+ \(git ([0-9a-f]{7,40}(-dirty\??)?|unknown)\)))")));
  const std::string version = m[1];
  CHECK_THAT(run("info").out, Catch::StartsWith("mrmf " + version + "\n"));

  Scratch s;
  const fs::path exp = tiny_experiment(s, 128, "  methods: [baseline]\n");
  const fs::path out = s.dir / "exp";
  r = run("experiment --config " + exp.string() + " --out " + out.string());
  INFO(r.out);
  REQUIRE(r.code == 0);
  // The report's writer, and each run's: the build that finished it.
  const std::string summary = slurp(out / "summary.json");
  CHECK_THAT(summary, Catch::Contains("\"mrmf\": \"" + version + "\""));
  CHECK(summary.find("\"mrmf\": \"" + version + "\"", summary.find("\"runs\"")) != std::string::npos);
  CHECK_THAT(slurp(out / "report.md"), Catch::Contains("; mrmf " + version + "."));

  const fs::path run_dir = s.dir / "run";
  r = run("train --config " + (s.dir / "tiny.yaml").string() + " --out " + run_dir.string() +
          " --set stop.max_epochs=1");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(slurp(run_dir / "summary.json"), Catch::Contains("\"mrmf\": \"" + version + "\""));
  const auto written_by =
      mrmf::data::H5File::open_read((run_dir / "checkpoint.h5").string()).read_string_attribute("/", "written_by");
  REQUIRE(written_by.has_value());
  CHECK(*written_by == "mrmf " + version);
  CHECK_THAT(slurp(run_dir / "summary.json"), Catch::Contains("\"trained_by\": [\n    \"" + version + "\"\n  ]"));

  // A run another build began: the builds that trained it, oldest first;
  // a resume that trains nothing more adds none.
  {
    const hid_t f = H5Fopen((run_dir / "checkpoint.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    REQUIRE(f >= 0);
    REQUIRE(H5Adelete(f, "trained_by") >= 0);
    const std::string older = "0.0.9 (git 0123456789ab)";
    const hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, older.size() + 1);
    const hid_t space = H5Screate(H5S_SCALAR);
    const hid_t a = H5Acreate2(f, "trained_by", type, space, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(H5Awrite(a, type, older.c_str()) >= 0);
    H5Aclose(a);
    H5Sclose(space);
    H5Tclose(type);
    H5Fclose(f);
  }
  const std::string both = "\"trained_by\": [\n    \"0.0.9 (git 0123456789ab)\",\n    \"" + version + "\"\n  ]";
  r = run("train --config " + (s.dir / "tiny.yaml").string() + " --out " + run_dir.string() +
          " --set stop.max_epochs=2 --resume");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(slurp(run_dir / "summary.json"), Catch::Contains(both));
  r = run("train --config " + (s.dir / "tiny.yaml").string() + " --out " + run_dir.string() +
          " --set stop.max_epochs=2 --resume");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(slurp(run_dir / "summary.json"), Catch::Contains(both));
}
