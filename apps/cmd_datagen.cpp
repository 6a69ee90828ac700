// `mrmf datagen`: synthetic Neuron Inverter and CosmoFlow data sets in the
// original applications' file layouts (see data/gen_neuron.h, data/gen_cosmoflow.h).
//
//   mrmf datagen neuron-inverter --out ni.h5 --train 16384 --val 2048 --test 2048 --seed 1
//   mrmf datagen cosmoflow --out cosmo/ --size 32 --train 1024 --val 128 --test 128 --seed 1
//
// Existing output is never replaced without --force, and every file is written
// under a temporary name and renamed when complete, so an interrupted run
// leaves the previous data intact.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "apps/cli_checks.h"
#include "apps/commands.h"
#include "core/communicator.h"
#include "core/device.h"
#include "core/error.h"
#include "core/log.h"
#include "core/output_paths.h"
#include "data/gen_cosmoflow.h"
#include "data/gen_neuron.h"

namespace fs = std::filesystem;

namespace mrmf::cli {
namespace {

// A one-line progress bar on stderr, only when stderr is a terminal (logs and
// batch jobs get the summary line alone). Redrawn at most 10 times a second.
class ProgressBar {
 public:
  explicit ProgressBar(const char* what) : what_(what), tty_(::isatty(::fileno(stderr)) != 0) {}
  ~ProgressBar() { finish(); }
  void update(int64_t done, int64_t total) {
    if (!tty_) return;
    const auto now = std::chrono::steady_clock::now();
    if (done < total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const double secs = std::chrono::duration<double>(now - start_).count();
    const int width = 30, fill = total > 0 ? static_cast<int>(width * done / total) : width;
    std::fprintf(stderr, "\r%s [%s%s] %lld/%lld samples  %.1f s", what_, std::string(fill, '#').c_str(),
                 std::string(width - fill, '.').c_str(), static_cast<long long>(done), static_cast<long long>(total),
                 secs);
    std::fflush(stderr);
    drawn_ = true;
  }
  void finish() {
    if (drawn_) std::fprintf(stderr, "\n");
    drawn_ = false;
  }

 private:
  const char* what_;
  bool tty_, drawn_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_{};
};

struct DatagenFlags {
  std::string out;
  bool force = false;
  int threads = 0;
  data::NeuronGenOptions ni;
  std::string ni_dtype = "float32";
  data::CosmoGenOptions cf;
};

// Refuses, before anything is generated, a data set that cannot fit in the
// free space where it goes (a typo of a few zeros would otherwise run until
// the disk is full).
void refuse_without_space(const std::string& out, double bytes) {
  fs::path dir = fs::absolute(out);
  std::error_code ec;
  // --force over an earlier data set frees its space as it goes.
  if (fs::is_regular_file(dir, ec)) bytes -= static_cast<double>(fs::file_size(dir, ec));
  if (fs::is_directory(dir, ec))
    for (const auto& e : fs::recursive_directory_iterator(dir, ec))
      if (e.is_regular_file(ec)) bytes -= static_cast<double>(e.file_size(ec));
  while (!dir.empty() && !fs::exists(dir, ec)) dir = dir.parent_path();
  const fs::space_info sp = fs::space(dir, ec);
  if (ec) return;  // unknown: let the writes tell
  MRMF_CHECK_KIND(Usage, bytes <= static_cast<double>(sp.available), "datagen: the data set needs about ",
                  fmt::format("{:.3g}", bytes / 1e9), " GB, but ", dir.string(), " has ",
                  fmt::format("{:.3g}", static_cast<double>(sp.available) / 1e9), " GB free (check the sample counts)");
}

// The three splits' sample count, summed in double: int64 counts that each
// pass their own check can overflow together (and the space check with them).
double total_samples(int64_t train, int64_t val, int64_t test) {
  return static_cast<double>(train) + static_cast<double>(val) + static_cast<double>(test);
}

void add_common(CLI::App* sub, DatagenFlags& f, int64_t& train, int64_t& val, int64_t& test, uint64_t& seed) {
  sub->add_option("--train", train, "training samples")->check(at_least(0))->capture_default_str();
  sub->add_option("--val", val, "validation samples")->check(at_least(0))->capture_default_str();
  sub->add_option("--test", test, "test samples")->check(at_least(0))->capture_default_str();
  sub->add_option("--seed", seed, "random seed (same seed -> identical files)")
      ->check(unsigned64())
      ->capture_default_str();
  sub->add_option("--threads", f.threads, "OpenMP threads (default: all cores)")
      ->check(CLI::Range(0, static_cast<int>(kMaxThreads)));
  sub->add_flag("--force", f.force, "replace existing output");
}

int run_neuron(DatagenFlags& f) {
  f.ni.dtype = f.ni_dtype == "float16" ? DType::F16 : DType::F32;
  f.ni.threads = f.threads;
  // One output file: under mpiexec/srun rank 0 writes it and the other ranks
  // wait (before, every rank wrote the same file at once).
  const Communicator world = Communicator::world();
  if (!world.is_root()) {
    world.idle_barrier();  // asleep: rank 0 may share this node's cores
    return 0;
  }
  check_output_place(f.out, fs::absolute(f.out).parent_path());
  refuse_existing_output(f.out, f.force);  // before announcing anything
  refuse_without_space(f.out, total_samples(f.ni.train, f.ni.val, f.ni.test) *
                                  (f.ni.time_bins * 3.0 * (f.ni.dtype == DType::F16 ? 2 : 4) + 19 * 4));
  if (world.size() > 1)
    log::info("datagen neuron-inverter writes one file: rank 0 generates it, {} rank(s) wait (--threads sets the "
              "cores it uses)", world.size() - 1);
  const fs::path parent = fs::path(f.out).parent_path();
  if (!parent.empty()) fs::create_directories(parent);
  ProgressBar bar("neuron-inverter");
  f.ni.progress = [&bar](int64_t d, int64_t t) { bar.update(d, t); };
  const auto s = data::generate_neuron_inverter(f.out, f.ni, f.force);
  bar.finish();
  std::printf("datagen neuron-inverter: wrote %s (train %lld, val %lld, test %lld; T=%d, C=3, P=19, %s) %.1f MB in "
              "%.1f s, %.0f samples/s\n",
              f.out.c_str(), static_cast<long long>(f.ni.train), static_cast<long long>(f.ni.val),
              static_cast<long long>(f.ni.test), f.ni.time_bins, f.ni_dtype.c_str(), s.bytes / 1e6, s.seconds,
              s.samples / std::max(s.seconds, 1e-9));
  world.idle_barrier();
  return 0;
}

int run_cosmoflow(DatagenFlags& f) {
  f.cf.threads = f.threads;
  // Many files: ranks share them (file k on rank k mod ranks).
  const Communicator world = Communicator::world();
  f.cf.rank = world.rank();
  f.cf.ranks = world.size();
  f.cf.barrier = [&world] { world.idle_barrier(); };
  check_output_place(f.out, f.out);
  refuse_without_space(f.out, total_samples(f.cf.train, f.cf.val, f.cf.test) *
                                  (std::pow(static_cast<double>(f.cf.size), 3) * 4 * 2 + 16));
  ProgressBar bar("cosmoflow");
  if (world.is_root()) f.cf.progress = [&bar](int64_t d, int64_t t) { bar.update(d, t); };
  const auto s = data::generate_cosmoflow(f.out, f.cf, f.force);
  bar.finish();
  world.idle_barrier();  // ranks with fewer files wait asleep for the others
  const double files = world.allreduce_sum(static_cast<double>(s.files));
  const double bytes = world.allreduce_sum(static_cast<double>(s.bytes));
  const double seconds = world.allreduce_max(s.seconds);
  const int64_t samples = f.cf.train + f.cf.val + f.cf.test;
  if (world.is_root())
    std::printf("datagen cosmoflow: wrote %lld files under %s (train %lld, val %lld, test %lld; %d^3 x 4 uint16) "
                "%.1f MB in %.1f s, %.1f samples/s%s\n",
                static_cast<long long>(files), f.out.c_str(), static_cast<long long>(f.cf.train),
                static_cast<long long>(f.cf.val), static_cast<long long>(f.cf.test), f.cf.size, bytes / 1e6, seconds,
                static_cast<double>(samples) / std::max(seconds, 1e-9),
                world.size() > 1 ? fmt::format(" on {} ranks", world.size()).c_str() : "");
  return 0;
}

}  // namespace

void add_datagen_command(CLI::App& app, Action& action) {
  auto* sub = app.add_subcommand("datagen", "Generate synthetic scientific data sets (original file layouts)");
  sub->require_subcommand(1);
  // Owned by the callbacks, which outlive parsing.
  auto f = std::make_shared<DatagenFlags>();

  auto* ni = sub->add_subcommand("neuron-inverter", "Neuron Inverter: one HDF5 file, frames (N, T, 3) + 19 labels");
  ni->add_option("--out", f->out, "output HDF5 file")->required()->check(non_empty());
  add_common(ni, *f, f->ni.train, f->ni.val, f->ni.test, f->ni.seed);
  ni->add_option("--time-bins", f->ni.time_bins, "time bins T over 200 ms (>= 5 integration steps each, dt <= 0.2 ms)")
      ->check(CLI::Range(8, 1000000))
      ->capture_default_str();
  ni->add_option("--dtype", f->ni_dtype, "stored frames: float32 or float16")
      ->check(CLI::IsMember({"float32", "float16"}))
      ->capture_default_str();
  ni->callback([&action, f] { action = [f] { return run_neuron(*f); }; });

  auto* cf = sub->add_subcommand("cosmoflow", "CosmoFlow: <out>/{train,val,test}/cosmo_NNN.h5, 3Dmap (n, D, H, W, 4)");
  cf->add_option("--out", f->out, "output folder")->required()->check(non_empty());
  add_common(cf, *f, f->cf.train, f->cf.val, f->cf.test, f->cf.seed);
  cf->add_option("--size", f->cf.size, "cube side, 16..512")->check(CLI::Range(16, 512))->capture_default_str();
  // CLI::PositiveNumber said "Value 0 not in range 0.000000 to 1797693...".
  cf->add_option("--per-file", f->cf.per_file, "samples per file")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  cf->callback([&action, f] { action = [f] { return run_cosmoflow(*f); }; });
}

}  // namespace mrmf::cli
