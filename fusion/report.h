// The experiment report: the paper's tables (validation loss, epochs before
// and after fusion, time per stage, total time, improvement over baseline
// and MRT; mean and spread over seeds), the per-epoch io/compute/comm
// breakdown per resolution, a stacked-bar chart of time per stage (SVG, like
// the paper's Figures 3 and 4), and summary.json with every number.
#pragma once

#include <string>
#include <vector>

#include "fusion/orchestrator.h"

namespace mrmf {

struct ReportContext {
  std::string title;
  std::string config_text;  // the experiment file as given
  int ranks = 1;
  std::string device;
  double target_val_loss = 0;
  // Runs (method x seed) the experiment is to have; a report of fewer says
  // it is partial, and how to continue.
  size_t planned_runs = 0;
};

// Writes report.md, chart.svg and summary.json into `dir`; returns the report's text.
std::string write_report(const std::string& dir, const std::vector<MethodRun>& runs, const ReportContext& ctx);

// The main table alone (for the console).
std::string summary_table(const std::vector<MethodRun>& runs);

}  // namespace mrmf
