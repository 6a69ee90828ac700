// `mrmf downsample`: a coarse copy of a data set for the low-resolution models
// (see data/downsample.h).
//
//   mrmf downsample --in ni.h5 --out ni_t800.h5 --factor 2 --axes t
//   mrmf downsample --in cosmo/ --out cosmo_half/ --factor 2 --axes x,y,z
//
// Exit codes: 0 done, 2 usage (bad axes/factor, a factor not dividing an
// axis, output exists without --force, other .h5 files in a CosmoFlow
// --out), 1 data/runtime failure (missing file, non-finite values, ...).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "apps/cli_checks.h"
#include "apps/commands.h"
#include "core/communicator.h"
#include "data/downsample.h"

namespace mrmf::cli {

void add_downsample_command(CLI::App& app, Action& action) {
  struct Flags {
    std::string in, out;
    data::DownsampleOptions opts;
  };
  auto f = std::make_shared<Flags>();  // owned by the callback, which outlives parsing
  auto* sub = app.add_subcommand(
      "downsample",
      "Write a coarse copy of a data set: mean of every k adjacent elements along the given axes. The copy holds "
      "means of the STORED values; a transform at training (data.transform: log1p) then applies to the means, "
      "whereas data.reduce transforms first and averages after -- with log1p the two inputs differ.");
  sub->add_option(
         "--in", f->in,
         "Neuron Inverter .h5 file, or CosmoFlow folder (the authors' 3Dmap files or LBANN's one-sample files)")
      ->required()
      ->check(non_empty());
  sub->add_option("--out", f->out, "output file (Neuron Inverter) or folder (CosmoFlow)")
      ->required()
      ->check(non_empty());
  sub->add_option("--factor", f->opts.factor, "elements averaged per axis")
      ->check(at_least(1))
      ->capture_default_str();
  sub->add_option("--axes", f->opts.axes, "t (Neuron Inverter) or a comma list of x,y,z (CosmoFlow: D,H,W)")
      ->capture_default_str();
  sub->add_flag("--force", f->opts.force, "replace existing output");
  sub->callback([&action, f] {
    action = [f] {
      // A CosmoFlow folder is shared by files over the ranks of an
      // mpiexec/srun launch; a Neuron Inverter file is written by rank 0.
      const Communicator world = Communicator::world();
      f->opts.rank = world.rank();
      f->opts.ranks = world.size();
      f->opts.barrier = [&world] { world.idle_barrier(); };
      std::error_code ec;  // a folder in: a folder out (CosmoFlow); a file in: a file out
      check_output_place(f->out, std::filesystem::is_directory(f->in, ec)
                                     ? std::filesystem::path(f->out)
                                     : std::filesystem::absolute(f->out, ec).parent_path());
      const auto s = data::downsample_dataset(f->in, f->out, f->opts);
      world.idle_barrier();  // ranks with less to write (all but rank 0 for one file) wait asleep
      const double files = world.allreduce_sum(static_cast<double>(s.files));
      const double samples = world.allreduce_sum(static_cast<double>(s.samples));
      const double in_mb = world.allreduce_sum(static_cast<double>(s.bytes_in)) / 1e6;
      const double out_mb = world.allreduce_sum(static_cast<double>(s.bytes_out)) / 1e6;
      const double seconds = world.allreduce_max(s.seconds);
      if (world.is_root())
        std::printf("downsample: wrote %lld file(s) under %s (%lld samples, factor %lld along %s) %.1f MB -> %.1f MB "
                    "in %.1f s\n",
                    static_cast<long long>(files), f->out.c_str(), static_cast<long long>(samples),
                    static_cast<long long>(f->opts.factor), f->opts.axes.c_str(), in_mb, out_mb, seconds);
      return 0;
    };
  });
}

}  // namespace mrmf::cli
