// The `mrmf` command: one binary, one subcommand per task, --help on each.
// Exit codes: 0 success, 2 usage or configuration error, 1 runtime failure.
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>

#include "apps/cli_checks.h"
#include "apps/commands.h"
#include "core/communicator.h"
#include "core/device.h"
#include "core/error.h"
#include "core/log.h"
#include "core/memory.h"
#include "core/stop_signal.h"
#include "core/version.h"
#include "data/h5file.h"
#include "data/hdf5_crash_note.h"
#include "kernels/rows_avx512.h"

namespace mrmf::cli {

void add_runtime_flags(CLI::App& sub, RuntimeFlags& flags) {
  sub.add_option("--device", flags.device, "cpu, cuda, cuda:N or auto (default: $MRMF_DEVICE or auto)")
      ->check(non_empty("DEVICE"));  // '' read as not given
  sub.add_option("--threads", flags.threads, "OpenMP threads for the CPU backend (default: all cores)")
      ->check(CLI::Range(int64_t{0}, kMaxThreads));
}

void apply_runtime_flags(const RuntimeFlags& flags) {
  if (flags.threads > 0) omp_set_num_threads(flags.threads);
}

void add_info_command(CLI::App& app, Action& action) {
  auto* sub = app.add_subcommand("info", "Show the backends this build has and the devices it sees");
  sub->callback([&action] {
    action = [] {
      std::printf("mrmf %s\n", build_version().c_str());
      std::printf("  CPU backend : oneDNN, %d OpenMP threads\n", omp_get_max_threads());
      std::printf("  CPU data rows: %s\n", kernels::rows_avx512_description().c_str());
      if (built_with_cuda()) {
        const int n = cuda_device_count();
        std::printf("  CUDA backend: built; %d device(s)%s%s\n", n, n ? "" : " -- ",
                    n ? "" : cuda_unavailable_reason().c_str());
      } else {
        std::printf("  CUDA backend: not built\n");
      }
      return 0;
    };
  });
}

}  // namespace mrmf::cli

int main(int argc, char** argv) {
  using namespace mrmf;
  CLI::App app{"mrmf: multi-resolution model fusion for scientific CNNs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "mrmf " + build_version());
  cli::Action action;
  cli::add_info_command(app, action);
  cli::add_datagen_command(app, action);
  cli::add_downsample_command(app, action);
  cli::add_train_command(app, action);
  cli::add_experiment_command(app, action);
  cli::add_eval_command(app, action);
  cli::add_predict_command(app, action);
  cli::add_bench_command(app, action);

  // MPI is initialized for every command (a singleton launch needs no
  // mpirun); usage errors are reported before that.
  int rc = 0;
  // CLI11 alone answers an unknown command with "A subcommand is required";
  // name the word it did not know and the commands it does.
  if (argc > 1 && argv[1][0] != '-') {
    std::string known;
    bool found = false;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      found = found || sub->get_name() == argv[1];
      known += (known.empty() ? "" : ", ") + sub->get_name();
    }
    if (!found) {
      std::fprintf(stderr, "mrmf: error: unknown command '%s' (expected one of: %s; see mrmf --help)\n", argv[1],
                   known.c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with exit code 0 in CLI11.
    rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  } catch (const Error& e) {
    std::fprintf(stderr, "mrmf: error: %s\n", e.message().c_str());
    return 2;
  }
  // SIGTERM / SIGUSR1 (a job's time limit): training stops at the next
  // step with a checkpoint instead of dying mid-write (core/stop_signal.h).
  // Only the commands that train look at it: the others keep the default
  // (the signal ends them at once).
  const std::string command = argc > 1 ? argv[1] : "";
  if (command == "train" || command == "experiment") install_stop_signal_handlers();
  try {
    kernels::check_rows_avx512_env();  // before any work: a typo must not pass unnoticed
    mpi_init(&argc, &argv);
    {
      int rank = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      data::install_hdf5_crash_note(rank);  // after MPI's own handlers: the note comes first
    }
    rc = action ? action() : 0;
  } catch (const Error& e) {
    // Usage and configuration errors are the user's to fix: show the message
    // alone. Everything else keeps rank, file:line and the failing call.
    const bool user = e.kind() == ErrorKind::Usage || e.kind() == ErrorKind::Config;
    std::fprintf(stderr, "mrmf: error: %s\n", user ? e.message().c_str() : e.what());
    rc = user ? 2 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mrmf: error: %s\n", e.what());
    rc = 1;
  }
  release_cached_memory();  // while the CUDA driver is still alive
  if (rc != 0 && mpi_initialized()) {
    // One failing rank must not leave the others waiting in a collective.
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    // A stop signal ends every rank of a training group at the same step,
    // its checkpoint written: wait for the job's other ranks (a concurrent
    // run's other group stops at its own next step, and may still be
    // writing its checkpoint) and end in order. Any other error, or ranks
    // that do not arrive within two minutes: abort.
    if (size > 1 && !(stopped_by_signal() && mpi_all_ranks_arrive(120.0))) {
      // MPI_Abort ends every rank at once, and the launcher (Hydra) may then
      // drop output it has not yet forwarded: the error message above, on
      // every rank that hit the same error. A moment first lets it through.
      std::fflush(nullptr);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      mpi_abort(rc);
    }
  }
  mpi_finalize();
  if (data::hdf5_close_failed()) {
    // A file whose close failed (full disk) stays registered in HDF5 1.10,
    // whose exit handler then closes it again and crashes: leave without it.
    std::fflush(nullptr);
    std::_Exit(rc != 0 ? rc : 1);
  }
  return rc;
}
