// Which build this is: the version and the git commit it was built from
// ("unknown" outside a git checkout; "-dirty" when tracked files differed
// from that commit or new source files were there, "-dirty?" when git could
// not tell). Recorded in summaries, reports and checkpoints so that a
// result can be traced to the code that made it.
#pragma once

#include <string>

namespace mrmf {

// "0.1.0 (git 1a2b3c4d5e6f)".
const std::string& build_version();
// The commit alone: "1a2b3c4d5e6f", "1a2b3c4d5e6f-dirty" or "unknown".
const std::string& build_commit();

}  // namespace mrmf
