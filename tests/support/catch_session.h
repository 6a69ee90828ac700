// The one translation unit that holds Catch2's implementation
// (catch_session.cpp) runs a session for every test program's main():
// Catch2 v2 compiles its whole implementation wherever CATCH_CONFIG_MAIN or
// CATCH_CONFIG_RUNNER is defined -- ~40 s at -O3 on a 2-core CI machine --
// and the unit, GPU and four MPI test programs each did so.
#pragma once

namespace mrmf::test {

// Catch::Session().run(argc, argv): the number of failed test cases (capped
// by Catch at 255), or non-zero for a bad command line.
int run_catch_session(int argc, char** argv);

}  // namespace mrmf::test
