// Catch2's implementation, compiled once for every test program (see
// catch_session.h). Built at -O0 (tests/CMakeLists.txt): the framework's
// speed does not matter and -O3 takes 2.4x as long to compile.
#define CATCH_CONFIG_RUNNER
#include "support/catch_session.h"

#include <catch2/catch.hpp>

namespace mrmf::test {

int run_catch_session(int argc, char** argv) { return Catch::Session().run(argc, argv); }

}  // namespace mrmf::test
