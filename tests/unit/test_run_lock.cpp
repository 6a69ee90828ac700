// One command a run folder (core/run_lock.h): a second lock on a held
// folder is refused naming the holder, a released one is taken again, a
// folder made for nothing is removed, and only AtomicOutput's partial files
// are cleaned up.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/run_lock.h"
#include "support/temp_dir.h"
#include "support/trainer_fixtures.h"

using namespace mrmf;
namespace fs = std::filesystem;

TEST_CASE("run lock: one command a folder, the holder named, partial files removed", "[cli]") {
  test::TempDir t("mrmf_lock");
  const std::string dir = t / "run";
  {
    const RunFolderLock a(dir, mrmf::test::trainer::world());
    REQUIRE(fs::is_directory(dir));
    // flock(2) locks an open file description: a second open conflicts even
    // in this process, as a second command's would.
    try {
      const RunFolderLock b(dir, mrmf::test::trainer::world());
      FAIL("a held folder was locked twice");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Usage);
      CHECK_THAT(e.what(), Catch::Contains("another mrmf command (pid " + std::to_string(::getpid()) + " on ") &&
                               Catch::Contains("is writing to " + dir));
    }
    CHECK(fs::is_directory(dir));  // the refused lock did not remove the holder's folder
  }
  // Released, and the folder it made held nothing else: gone.
  CHECK_FALSE(fs::exists(dir));

  fs::create_directories(fs::path(dir) / "runs" / "a");
  for (const char* p :
       {"checkpoint.h5.tmp.123.0", "runs/a/stage.h5.tmp.45.7", "keep.tmp.h5", "notes.tmp.1", "metrics.jsonl"})
    std::ofstream(fs::path(dir) / p) << "x";
  {
    const RunFolderLock a(dir, mrmf::test::trainer::world());
    CHECK(a.remove_partial_files() == 2);
  }
  CHECK_FALSE(fs::exists(fs::path(dir) / "checkpoint.h5.tmp.123.0"));
  CHECK_FALSE(fs::exists(fs::path(dir) / "runs/a/stage.h5.tmp.45.7"));
  for (const char* p : {"keep.tmp.h5", "notes.tmp.1", "metrics.jsonl"}) CHECK(fs::exists(fs::path(dir) / p));
  CHECK(fs::exists(fs::path(dir) / ".mrmf.lock"));  // a folder it did not make keeps its lock file
}
