// Running the `mrmf` binary from the CLI tests (test_cli.cpp,
// test_cli_keeps_files.cpp, test_cli_experiment.cpp): where it is, how a command's exit code and output
// come back, scratch folders, and the tiny data and configs the cases share.
//
// The binary is $MRMF_BIN, or <build>/bin/mrmf next to the tests' build
// folder (<build>/tests/mrmf_unit_tests, found through /proc/self/exe). When
// neither exists the cases are skipped with a warning (e.g. a build of the
// tests alone).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace mrmf::clitest {

namespace fs = std::filesystem;

inline std::string mrmf_bin() {
  if (const char* e = std::getenv("MRMF_BIN")) return e;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (fs::path d = exe.parent_path(); !d.empty() && d != d.root_path(); d = d.parent_path())
    if (fs::exists(d / "bin" / "mrmf")) return (d / "bin" / "mrmf").string();
  return "";
}

struct Result {
  int code = -1;
  std::string out;  // stdout and stderr together
};

// Runs the binary with a shell command tail; stderr is captured with stdout.
inline Result run_prefixed(const std::string& launcher, const std::string& args) {
  Result r;
  const std::string cmd = "OMP_NUM_THREADS=1 MRMF_DEVICE=cpu " + launcher + mrmf_bin() + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}
inline Result run(const std::string& args) { return run_prefixed("", args); }
// stdout alone (stderr discarded): for machine-readable output.
inline Result run_stdout(const std::string& args) { return run_prefixed("", args + " 2>/dev/null #"); }

#define SKIP_WITHOUT_BINARY()                                              \
  if (mrmf_bin().empty()) {                                                \
    WARN("mrmf binary not found (set MRMF_BIN): skipping the CLI checks"); \
    return;                                                                \
  }

struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("mrmf_cli_" + std::to_string(::getpid()));
  Scratch() { fs::create_directories(dir); }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

// A run config for the tiny file: a small model so that training takes a second.
inline std::string write_config(const fs::path& dir, const std::string& data) {
  const fs::path p = dir / "tiny.yaml";
  std::ofstream(p) << "model:\n  name: neuron_inverter\n"
                      "  options: {conv_channels: '8,16,16', kernel: 3, pool: 2, fc: '32,32'}\n"
                      "data: {format: neuron_inverter, path: '"
                   << data
                   << "'}\n"
                      "train: {batch_size: 32, seed: 1}\n"
                      "optimizer: {name: adam, lr: 2.0e-3}\n"
                      "stop: {max_epochs: 2}\n"
                      "runtime: {device: cpu}\n";
  return p.string();
}

// A file's whole contents (bytes as stored).
inline std::string slurp(const fs::path& p) {
  std::stringstream ss;
  ss << std::ifstream(p, std::ios::binary).rdbuf();
  return ss.str();
}

// A small synthetic Neuron Inverter file at `path` (`args`: sizes, T, seed).
inline void make_tiny_ni(const std::string& path, const std::string& args) {
  const Result r = run("datagen neuron-inverter --out " + path + args);
  INFO(r.out);
  REQUIRE(r.code == 0);
}

// A tiny Neuron Inverter file (T = 64, `train` samples), the tiny run config
// on it, and an experiment config (one seed, target 0.001, 1 final epoch,
// ladder [[2], [1]]) with `body` added to its experiment section.
inline fs::path tiny_experiment(const Scratch& s, int train, const std::string& body) {
  const std::string data = (s.dir / "ni.h5").string();
  make_tiny_ni(data, " --train " + std::to_string(train) + " --val 64 --test 64 --time-bins 64 --seed 3");
  write_config(s.dir, data);
  const fs::path exp = s.dir / "exp.yaml";
  std::ofstream(exp) << "base: tiny.yaml\nexperiment:\n  seeds: [1]\n  target_val_loss: 0.001\n  max_epochs: 1\n"
                        "  ladder: [[2], [1]]\n"
                     << body;
  return exp;
}

// `mrmf X --help` exits 0 even for an unknown X (CLI11 shows the main help),
// so look for X in the list of subcommands instead.
inline bool has_command(const std::string& name) {
  const Result r = run("--help");
  return r.code == 0 && r.out.find("\n  " + name + " ") != std::string::npos;
}

}  // namespace mrmf::clitest
