// Every run configuration shipped in configs/ parses with the schema, and so
// does every configuration the Slurm scripts (scripts/slurm/*.sbatch) refer
// to -- including the experiment file and its base. The shell-level checks
// (bash -n, #SBATCH lines, modules, srun line) are the CTest entry
// slurm_scripts_syntax (scripts/slurm/check_scripts.sh).
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "core/error.h"
#include "fusion/config.h"
#include "fusion/experiment_config.h"
#include "support/source_tree.h"

using namespace mrmf;
namespace fs = std::filesystem;

using mrmf::testing::source_root;
static std::string slurp(const fs::path& p) { return mrmf::testing::read_text(p); }

// An experiment file (fusion/experiment_config.h) has a top-level `experiment:` section.
static bool is_experiment(const fs::path& p) {
  const std::string t = slurp(p);
  return t.rfind("experiment:", 0) == 0 || t.find("\nexperiment:") != std::string::npos;
}

TEST_CASE("slurm: every configs/**/*.yaml parses (run or experiment schema)", "[slurm][config]") {
  const fs::path root = source_root();
  if (root.empty()) {
    WARN("source tree not found from the test binary: skipping");
    return;
  }
  int n = 0;
  for (const auto& e : fs::recursive_directory_iterator(root / "configs")) {
    if (e.path().extension() != ".yaml") continue;
    INFO(e.path().string());
    if (is_experiment(e.path())) {
      CHECK_NOTHROW(load_experiment_config(e.path().string(), {}));
    } else {
      RunConfig c;
      REQUIRE_NOTHROW(c = load_run_config(e.path().string(), {}));
      CHECK(!c.data.path.empty());
    }
    ++n;
  }
  CHECK(n >= 4);
}

TEST_CASE("slurm: the configurations the batch scripts use exist and parse", "[slurm][config]") {
  const fs::path root = source_root();
  if (root.empty()) {
    WARN("source tree not found from the test binary: skipping");
    return;
  }
  const std::regex ref(R"(((configs|scripts/slurm)/[A-Za-z0-9_./-]+\.yaml))");
  int scripts = 0;
  for (const auto& e : fs::directory_iterator(root / "scripts" / "slurm")) {
    if (e.path().extension() != ".sbatch") continue;
    ++scripts;
    const std::string text = slurp(e.path());
    std::set<std::string> refs;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), ref); it != std::sregex_iterator(); ++it)
      refs.insert((*it)[1]);
    INFO(e.path().filename().string());
    CHECK(!refs.empty());
    for (const auto& r : refs) {
      const fs::path p = root / r;
      INFO(r);
      REQUIRE(fs::exists(p));
      // The experiment file has its own schema; run configs the run schema.
      if (is_experiment(p)) {
        CHECK_NOTHROW(load_experiment_config(p.string(), {}));
      } else {
        const RunConfig c = load_run_config(p.string(), {});
        CHECK(c.runtime.device == "cuda");  // Perlmutter runs are GPU runs
      }
    }
  }
  CHECK(scripts >= 3);
}
