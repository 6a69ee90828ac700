#include "apps/cli_checks.h"

#include <filesystem>
#include <stdexcept>
#include <string>

#include "core/communicator.h"
#include "core/error.h"
#include "core/output_paths.h"

namespace mrmf::cli {
namespace fs = std::filesystem;

CLI::Validator at_least(long long lo) {
  return CLI::Validator(
      [lo](std::string& v) -> std::string {
        long long x = 0;
        size_t used = 0;
        try {
          x = std::stoll(v, &used);
        } catch (...) {
          used = 0;
        }
        if (used == 0 || used != v.size()) return "expected a whole number, got '" + v + "'";
        if (x < lo) return "must be at least " + std::to_string(lo) + ", got " + v;
        return "";
      },
      "INT>=" + std::to_string(lo));
}

CLI::Validator unsigned64() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
          return "must be a non-negative integer, got '" + s + "'";
        try {
          (void)std::stoull(s);
        } catch (const std::out_of_range&) {
          return "must be at most 2^64 - 1, got " + s;
        }
        return {};
      },
      "UINT64");
}

CLI::Validator non_empty() {
  return CLI::Validator([](std::string& v) -> std::string { return v.empty() ? "must not be empty" : ""; }, "PATH");
}

void refuse_existing_results(const std::string& out, const std::vector<std::string>& files, bool force,
                             const std::string& remedy, const Communicator& world) {
  std::string found;
  std::error_code ec;
  MRMF_CHECK_KIND(Usage, !fs::exists(out, ec) || fs::is_directory(out, ec), "--out ", out,
                  " is a file, expected a folder (or a path that does not exist yet)");
  for (const auto& f : files)
    if (fs::exists(fs::path(out) / f, ec)) found += (found.empty() ? "" : ", ") + f;
  const bool any = world.allreduce_max(found.empty() ? 0.0 : 1.0) > 0;
  if (!any || force) return;
  MRMF_THROW(Usage, out, " already holds results (", found.empty() ? "on another rank's view" : found, "); ",
             remedy);
}

void refuse_output_file(const std::string& out, const std::vector<std::string>& inputs, bool force) {
  for (const auto& in : inputs)
    MRMF_CHECK_KIND(Usage, !same_file(out, in), "--out ", out, " is the same file as the input ", in,
                    "; writing it would destroy the input");
  refuse_existing_output(out, force);
}

}  // namespace mrmf::cli
