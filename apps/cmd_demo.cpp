// Placeholder: replaced by the small end-to-end training run.
#include "apps/commands.h"

namespace mrmf::cli {
void add_demo_command(CLI::App& app, Action& action) {
  auto* sub = app.add_subcommand("demo", "Small end-to-end training run on synthetic data (CPU)");
  sub->callback([&action] { action = [] { return 0; }; });
}
}  // namespace mrmf::cli
