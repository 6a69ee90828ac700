#include "apps/cli_checks.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/communicator.h"
#include "core/error.h"
#include "core/output_paths.h"
#include "data/formats.h"

namespace mrmf::cli {
namespace fs = std::filesystem;

CLI::Validator between(long long lo, long long hi) {
  return CLI::Validator(
      [lo, hi](std::string& v) -> std::string {
        long long x = 0;
        size_t used = 0;
        try {
          x = std::stoll(v, &used);
        } catch (...) {
          used = 0;
        }
        if (used == 0 || used != v.size()) return "expected a whole number, got '" + v + "'";
        if (x < lo) return "must be at least " + std::to_string(lo) + ", got " + v;
        if (x > hi) return "must be at most " + std::to_string(hi) + ", got " + v;
        return "";
      },
      hi == std::numeric_limits<long long>::max() ? "INT>=" + std::to_string(lo)
                                                  : "INT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

CLI::Validator at_least(long long lo) { return between(lo, std::numeric_limits<long long>::max()); }

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

CLI::Validator boolean_word() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        std::string lower = v;
        for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        for (const char* w : {"0", "1", "true", "false", "on", "off", "yes", "no"})
          if (lower == w) return "";
        return "expected 0 or 1 (true/false, on/off, yes/no), got '" + v + "'";
      },
      "BOOL");
}

CLI::Validator non_empty(const std::string& name) {
  return CLI::Validator([](std::string& v) -> std::string { return v.empty() ? "must not be empty" : ""; }, name);
}

void check_output_place(const std::string& out, const fs::path& place) {
  std::error_code ec;
  for (fs::path p = fs::absolute(place, ec); !ec && !p.empty(); p = p.parent_path()) {
    if (!fs::exists(p, ec)) {
      if (p == p.root_path()) break;
      continue;
    }
    MRMF_CHECK_KIND(Usage, fs::is_directory(p, ec), "--out ", out, ": ", p.string(),
                    " is a file, so the folder cannot be made");
    // A file made and removed at once: access(W_OK) says yes to root
    // whatever the file system allows (/sys, /proc, a read-only export).
    // Named per host, process and a random number: ranks on several nodes
    // (whose pids may be equal in containers) probe one folder at once.
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    const std::string probe = (p / (".mrmf-write-test-" + std::string(host) + "-" + std::to_string(::getpid()) + "-" +
                                    std::to_string(std::random_device{}())))
                                  .string();
    const int fd = ::open(probe.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    const int err = errno;
    if (fd >= 0) {
      ::close(fd);
      ::unlink(probe.c_str());
    }
    MRMF_CHECK_KIND(Usage, fd >= 0, "--out ", out, ": cannot write in ", p.string(), " (", std::strerror(err), ")");
    break;
  }
}

void refuse_existing_results(const std::string& out, const std::vector<std::string>& files, bool force,
                             const std::string& remedy, const Communicator& world) {
  std::string found;
  std::error_code ec;
  MRMF_CHECK_KIND(Usage, !fs::exists(out, ec) || fs::is_directory(out, ec), "--out ", out,
                  " is a file, expected a folder (or a path that does not exist yet)");
  check_output_place(out, out);
  for (const auto& f : files)
    if (fs::exists(fs::path(out) / f, ec)) {
      // A FIFO there blocked the command's first open of it: a hang.
      const fs::path p = fs::path(out) / f;
      MRMF_CHECK_KIND(Usage, fs::is_regular_file(p, ec) || fs::is_directory(p, ec), p.string(),
                      " is not a regular file (a FIFO, socket or device); expected the run's own ", f);
      found += (found.empty() ? "" : ", ") + f;
    }
  const bool any = world.allreduce_max(found.empty() ? 0.0 : 1.0) > 0;
  if (!any || force) return;
  MRMF_THROW(Usage, out, " already holds results (", found.empty() ? "on another rank's view" : found, "); ",
             remedy);
}

namespace {
// Whether `p` lies inside folder `dir` (both made canonical as far as they exist).
bool inside(const fs::path& p, const fs::path& dir) {
  std::error_code ep, ed;
  const fs::path a = fs::weakly_canonical(p, ep), d = fs::weakly_canonical(dir, ed);
  return !ep && !ed && std::mismatch(d.begin(), d.end(), a.begin(), a.end()).first == d.end();
}
}  // namespace

void refuse_inputs_among_results(const std::string& out, const std::vector<std::string>& written,
                                 const std::vector<std::pair<std::string, std::string>>& inputs) {
  const fs::path o(out), prev = o / "previous_run";
  std::error_code ec;
  for (const auto& [name, value] : inputs) {
    if (value.empty()) continue;
    std::vector<std::string> files{value};
    if (fs::is_directory(value, ec)) {
      for (const char* sub : {"", "train", "val", "test"})
        MRMF_CHECK_KIND(Usage, !same_file((fs::path(value) / sub).string(), out), name, " ", value, " holds --out ",
                        out, " as a data folder: the run's files there would be read as data");
      files.clear();
    } else if (value.find_first_of("*?[,") != std::string::npos && !fs::exists(value, ec)) {
      try {
        files = data::expand_file_list(value);
      } catch (const Error&) {
        files.clear();  // matches nothing: the loader says so when it opens the split
      }
    }
    for (const auto& in : files) {
      for (const auto& w : written)
        MRMF_CHECK_KIND(Usage, !same_file(in, (o / w).string()), name, " ", in, " is ", (o / w).string(),
                        ", a file this run writes: it would be replaced");
      MRMF_CHECK_KIND(Usage, !inside(in, prev), name, " ", in, " lies in ", prev.string(),
                      ", where the run that --force replaces is set aside and then deleted");
    }
  }
}

void refuse_output_file(const std::string& out, const std::vector<std::string>& inputs, bool force) {
  // Found only when the output was written, after the whole split had been
  // computed: a folder name, a path under a file, a folder it cannot write in.
  MRMF_CHECK_KIND(Usage, !out.empty() && out.back() != '/', "--out ", out,
                  ": names a folder; the output is a file (e.g. ", out, "predictions.h5)");
  std::error_code ec;
  check_output_place(out, fs::absolute(out, ec).parent_path());
  for (const auto& in : inputs) {
    MRMF_CHECK_KIND(Usage, !same_file(out, in), "--out ", out, " is the same file as the input ", in,
                    "; writing it would destroy the input");
    // Also a file the input reads through an HDF5 external link, a virtual
    // dataset or external raw storage: --force replaced it.
    for (const auto& behind : data::files_behind(in))
      MRMF_CHECK_KIND(Usage, !same_file(out, behind), "--out ", out, " is ", behind, ", which the input ", in,
                      " reads through an HDF5 link or external storage; writing it would "
                      "destroy the input");
  }
  refuse_existing_output(out, force);
}

void agree_on_all_ranks(const std::string& mine, const std::string& what, const Communicator& world) {
  const std::string root = world.broadcast_string(mine, 0);
  const int differing = static_cast<int>(world.allreduce_max(root == mine ? 0.0 : world.rank()));
  if (differing == 0) return;
  const std::string theirs = world.broadcast_string(mine, differing);  // every rank throws the same words
  MRMF_THROW(Config, "ranks disagree on ", what, ": rank 0 has ", root, "; rank ", differing, " has ", theirs,
             " (give every rank the same flags)");
}

}  // namespace mrmf::cli
