// Entry point of the GPU test executable: where no GPU can be used it exits
// with 77, which CTest reports as *skipped* (SKIP_RETURN_CODE), never passed.
#include <cstdio>

#include "core/device.h"
#include "core/memory.h"
#include "support/catch_session.h"

int main(int argc, char** argv) {
  if (mrmf::cuda_device_count() == 0) {
    std::printf("mrmf GPU tests skipped: %s\n", mrmf::cuda_unavailable_reason().c_str());
    return 77;
  }
  const int rc = mrmf::test::run_catch_session(argc, argv);
  mrmf::release_cached_memory();  // before static destruction, while the driver is alive
  return rc;
}
