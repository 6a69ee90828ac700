// Placeholder until the data generators land: `mrmf datagen` says so.
#include "apps/commands.h"
#include "core/error.h"

namespace mrmf::cli {
void add_datagen_command(CLI::App& app, Action& action) {
  auto* sub = app.add_subcommand("datagen", "Generate synthetic datasets (not yet available)");
  sub->callback([&action] { action = []() -> int { MRMF_THROW(Usage, "datagen is not available in this build yet"); }; });
}
}  // namespace mrmf::cli
