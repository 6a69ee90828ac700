// The `mrmf` command (grows subcommand by subcommand).
#include <cstdio>

#include "core/device.h"

int main() {
  std::printf("mrmf %s backend(s): cpu%s\n", "0.1.0", mrmf::built_with_cuda() ? ", cuda" : "");
  return 0;
}
