// Entry point of the unit test executable.
#include "support/catch_session.h"

int main(int argc, char** argv) { return mrmf::test::run_catch_session(argc, argv); }
