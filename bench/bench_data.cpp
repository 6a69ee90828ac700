// Data-pipeline benchmark (reported, not asserted):
//  (a) loader throughput over page-cached CosmoFlow files vs a plain sequential
//      read of the same files with the same HDF5 hyperslab (one sample) in the
//      same run -- target >= 80 %: the authors' uint16 (also count-like
//      cubes with CosmoFlow's log1p) and float32 `3Dmap`
//      and LBANN's one-sample files (float32, int16), each through HDF5 and
//      mapped; plus the Neuron Inverter loader over its preloaded shard (many
//      small samples: per-sample overhead shows here);
//  (b) the fused downsample kernel's bandwidth (bytes read + written) vs a
//      memcpy moving the same bytes, both with the same OpenMP thread count,
//      on a production-like batch (8 x 128^3 x 4 uint16 = 134 MB in, so that
//      neither fits in cache), and vs a device-to-device copy on a GPU when one
//      exists -- target >= 80 %;
//  (c) prefetching under a simulated compute step longer than the I/O per
//      batch, over several epochs of one loader: fraction of each epoch spent
//      waiting -- target <= 5 % (the first epoch of a fresh loader necessarily
//      waits for its first batch; later ones are prefetched across the epoch
//      boundary).
//
//   bench_data [--small] [--only cf|ni|kernel|prefetch] [--case TEXT] [--out results.txt]
//     --small: 32^3 samples everywhere, CI speed; --only: one section (A/B runs of two builds);
//     --case: only the loader and kernel rows whose name contains TEXT, or is TEXT after a
//     leading '=' (a profiler then sees one case; the plain reads they are paired with still run)
//   bench_data --only kernel --ab-env VAR=A,B [--case TEXT]
//     each CPU kernel row timed with the environment variable VAR set to A and to B in turn,
//     31 pairs in one process: the median of the per-pair time ratios B/A. For a switch a
//     build under study reads per call (the committed kernel reads none): on the shared VMs
//     whole runs drift by 2x, and this resolves a 5 % change that runs apart do not
//     (bench/results/cpu_data_2026-11-29c.txt).
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_data/sections.h"
#include "core/device.h"
#include "core/prefetch.h"
#include "data/formats.h"
#include "data/h5file.h"
#include "data/loader.h"
#include "data/prefetch.h"
#include "data/shuffle.h"
#include "kernels/fused_downsample_ops.h"
#include "kernels/rows_avx512.h"

using namespace mrmf;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

using namespace mrmf::bench;

int main(int argc, char** argv) {
  bool small = false;
  std::string out, only, only_case, ab_var, ab_a, ab_b;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--small")) small = true;
    else if (!std::strcmp(argv[i], "--ab-env") && i + 1 < argc) {
      const std::string v = argv[++i];
      const size_t eq = v.find('='), comma = eq == std::string::npos ? eq : v.find(',', eq);
      if (eq == 0 || comma == std::string::npos) {
        std::fprintf(stderr, "bench_data: --ab-env wants VAR=A,B, got '%s'\n", v.c_str());
        return 2;
      }
      ab_var = v.substr(0, eq);
      ab_a = v.substr(eq + 1, comma - eq - 1);
      ab_b = v.substr(comma + 1);
    } else if (!std::strcmp(argv[i], "--out") && i + 1 < argc)
      out = argv[++i];
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else if (!std::strcmp(argv[i], "--case") && i + 1 < argc) only_case = argv[++i];
    else {
      std::fprintf(stderr,
                   "usage: bench_data [--small] [--only cf|ni|kernel|prefetch] [--case TEXT] [--ab-env VAR=A,B] "
                   "[--out FILE]\n");
      return 2;
    }
  }
  if (!only.empty() && only != "cf" && only != "ni" && only != "kernel" && only != "prefetch") {
    std::fprintf(stderr, "bench_data: --only must be cf, ni, kernel or prefetch, got '%s'\n", only.c_str());
    return 2;
  }
  const auto section = [&](const char* name) { return only.empty() || only == name; };
  const auto wanted = [&](const std::string& name) {
    if (only_case.empty()) return true;
    return only_case[0] == '=' ? name == only_case.substr(1) : name.find(only_case) != std::string::npos;
  };
  const int side = small ? 32 : 64, per_file = 16, files = small ? 2 : 4, B = 8;
  const int side_b = small ? 32 : 128;  // (b): production CosmoFlow cubes
  const fs::path dir = fs::temp_directory_path() / ("mrmf_bench_data_" + std::to_string(::getpid()));
  // `files` files of the authors' layout in folder/train, element i of file
  // f holding value(f, i).
  const auto cubes = [&](int f, const std::function<uint16_t(int, int64_t)>& value) {
    Tensor x = Tensor::empty({per_file, side, side, side, 4}, DType::U16);
    auto* p = static_cast<uint16_t*>(x.raw_data());
    for (int64_t i = 0; i < x.numel(); ++i) p[i] = value(f, i);
    return x;
  };
  const auto write_cubes = [&](const fs::path& folder, const std::function<uint16_t(int, int64_t)>& value) {
    fs::create_directories(folder / "train");
    for (int f = 0; f < files; ++f)
      data::write_cosmoflow_file((folder / "train" / ("c" + std::to_string(f) + ".h5")).string(), cubes(f, value),
                                 Tensor::full({per_file, 4}, 0.1f));
  };
  const int64_t per_file_elems = int64_t(per_file) * side * side * side * 4;
  const auto counts = [per_file_elems](int f, int64_t i) { return geometric_count(f * per_file_elems + i); };
  write_cubes(dir, [](int, int64_t i) { return static_cast<uint16_t>((i * 2654435761u) >> 20); });
  const int64_t sample_bytes = int64_t(side) * side * side * 4 * 2, total = int64_t(files) * per_file;
  row("bench_data: %d OpenMP threads (kernel and memcpy alike), %d^3 x 4 uint16 samples (%.1f MB), %lld samples\n",
      omp_get_max_threads(), side, sample_bytes / 1e6, static_cast<long long>(total));

  // (a) plain sequential read, one sample per hyperslab, vs the loader (no
  // reduction). Each loader row is timed in pairs with the plain read
  // (alternating epochs, median of the per-pair ratios, as in (b)): this VM's
  // memory bandwidth changes phase every few seconds, and a read timed
  // apart from the loader put the same loader anywhere between 30 % and 97 %.
  // The plain read of the authors' files `files`, stored as `dt`, one
  // sample per read into `buf`.
  const auto plain_reader = [](const data::CosmoFlowFiles& files, DType dt, std::vector<char>& buf) {
    return [&files, dt, &buf] {
      // HDF5 calls beside live loaders take the process-wide lock (data/prefetch.h).
      std::lock_guard<std::recursive_mutex> lock(data::hdf5_mutex());
      for (size_t f = 0; f < files.num_files(); ++f) {
        const data::H5File h = data::H5File::open_read(files.path(f));
        for (int64_t r = 0; r < files.samples(f); ++r) h.read_rows_into("3Dmap", r, 1, dt, buf.data());
      }
    };
  };
  const data::CosmoFlowFiles cf = data::CosmoFlowFiles::open((dir / "train" / "*.h5").string());
  std::vector<char> buf(static_cast<size_t>(sample_bytes));
  const auto plain_read = plain_reader(cf, DType::U16, buf);
  const int kPairs = small ? 3 : 9;
  // I/O thread counts timed: 1, 2, and up to 4 where the machine has the
  // cores (more threads than cores only measure the oversubscription); 6
  // and 8 where it has twice that many (the training step keeps the rest):
  // CosmoFlow at full resolution on the CPU writes twice the bytes it
  // reads, and 4 threads reached 72-96 % of the plain read on the 16-core
  // GPU hosts.
  std::vector<int> ios{1, 2};
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  for (int io : {3, 4, 6, 8})
    if (io <= std::min(4, cores) || 2 * io <= cores) ios.push_back(io);
  data::LoaderOptions o;
  o.batch_size = B;
  o.cache_in_memory = false;
  // CosmoFlow files through HDF5 unless a row says "mapped"
  // (LoaderOptions::memory_map, the default in training).
  o.memory_map = false;
  bool map_files = false;
  // One epoch of a fresh loader per call, epochs counting up (so that the
  // batches prefetched across the epoch boundary are used, as in training).
  // io_threads = 1: the I/O thread reads and converts; n > 1: n - 1
  // converter threads beside it. cache: the in-memory cache on (the training default); the
  // warm-up epoch fills it, so the timed ones are later epochs.
  std::unique_ptr<data::Loader> L;
  auto loader_vs = [&](const std::function<void()>& reference, data::DataFormat fmt, const std::string& path, int io,
                       int64_t batch, std::vector<int64_t> reduce, bool cache = false, int64_t depth = -1,
                       Device dev = Device::cpu(), bool overlap_h2d = false) {
    data::LoaderOptions lo = o;
    lo.device = dev;
    lo.overlap_h2d = overlap_h2d;
    if (depth >= 0) lo.prefetch_depth = depth;
    // No prefetching across the epoch boundary here: the I/O thread would
    // produce the next epoch's first batches while the reference read is
    // being timed -- slowing the read and lending the loader free time (a
    // review measured 0.38 -> 0.90 for the same CosmoFlow loader). Section
    // (c) measures that prefetch on its own.
    lo.prefetch_next_epoch = false;
    lo.cache_in_memory = cache;
    lo.memory_map = map_files;
    lo.io_threads = io;
    lo.batch_size = batch;
    lo.reduce = std::move(reduce);
    L = data::open_loader({fmt, path, data::Split::Train}, lo);
    int64_t e = 0;
    const auto epoch = [&] {
      L->start_epoch(e++);
      data::LoaderBatch bt;
      while (L->next(bt)) {
      }
    };
    return paired(kPairs, epoch, reference);  // ratio: reference time / loader time
  };
  row("\n(a) %-48s %12s %10s %9s %6s   (paired with the plain read: median ratio, best/best)\n", "reader", "samples/s",
      "GB/s", "% plain", "best");
  // One paired row: n samples of `bytes` each per timed call of the measured side.
  const auto paired_row = [&](const char* name, const Paired& pr, int64_t n, int64_t bytes) {
    const double sps = double(n) / pr.a;
    row("    %-48s %12.0f %10.2f %8.0f%% %5.0f%%\n", name, sps, sps * bytes / 1e9, 100 * pr.ratio,
        100 * pr.b_best / pr.a_best);
  };
  // Rows of loaders of `fmt` over `path` for every I/O thread count, read
  // through HDF5 and then mapped, each paired with `reference`; `name(mapped,
  // io)` names a row, `bytes` is one sample's stored size; `io_list` the
  // I/O thread counts (empty: all of `ios`).
  const auto hdf5_and_mapped_rows = [&](const std::function<std::string(bool, int)>& name,
                                        const std::function<void()>& reference, data::DataFormat fmt,
                                        const std::string& path, int64_t bytes, std::vector<int> io_list = {}) {
    if (io_list.empty()) io_list = ios;
    for (bool mapped : {false, true})
      for (int io : io_list) {
        const std::string n = name(mapped, io);
        if (!wanted(n)) continue;
        map_files = mapped;
        const Paired pr = loader_vs(reference, fmt, path, io, B, {});
        map_files = false;
        paired_row(n.c_str(), pr, L->samples_per_epoch(), bytes);
      }
  };
  const auto cf_row = [&](const char* name, const Paired& pr) {
    paired_row(name, pr, L->samples_per_epoch(), sample_bytes);
  };
  if (section("cf") || section("prefetch")) {
    const double t_plain = best_of(3, plain_read);
    const double plain_sps = total / t_plain;
    row("    %-48s %12.0f %10.2f\n", "plain HDF5 read, 1-sample hyperslabs", plain_sps, plain_sps * sample_bytes / 1e9);
  }
  double t_sample = 0;  // the 1-thread loader's time per sample, for (c)
  for (int io : ios) {
    if (!section("cf") && !(section("prefetch") && io == 1)) break;  // (c) needs t_sample
    char name[64];
    std::snprintf(name, sizeof name, "loader (+ to float32 NCDHW, io_threads %d)", io);
    if (!wanted(name) && !(section("prefetch") && io == 1)) continue;
    const Paired pr = loader_vs(plain_read, data::DataFormat::CosmoFlow, dir.string(), io, B, {});
    if (io == 1) t_sample = pr.a / double(L->samples_per_epoch());
    cf_row(name, pr);
  }
  // Later epochs: the cache keeps the uint16 samples (half the float32
  // size), converted from RAM every epoch.
  for (int io : ios) {
    if (!section("cf")) break;
    char name[64];
    std::snprintf(name, sizeof name, "loader, later epochs (cached, io_threads %d)", io);
    if (!wanted(name)) continue;
    cf_row(name, loader_vs(plain_read, data::DataFormat::CosmoFlow, dir.string(), io, B, {}, /*cache=*/true));
  }
  // The files mapped (the training default): every epoch converted from
  // the page cache like a preloaded shard, in chunks any thread may take,
  // with no staging copy by the I/O thread.
  for (int io : ios) {
    if (!section("cf")) break;
    char name[64];
    std::snprintf(name, sizeof name, "loader, mapped files (io_threads %d)", io);
    if (!wanted(name)) continue;
    map_files = true;
    cf_row(name, loader_vs(plain_read, data::DataFormat::CosmoFlow, dir.string(), io, B, {}));
    map_files = false;
  }
  // The same, with CosmoFlow's input transform (configs/cosmoflow_*.yaml:
  // log1p) on count-like cubes, as training reads them: the fused kernel's
  // 1/1 with log1p in every batch. Its own files and plain read.
  const auto counts_row = [](int io) {
    return "loader, mapped, counts, log1p (io_threads " + std::to_string(io) + ")";
  };
  if (section("cf") && std::any_of(ios.begin(), ios.end(), [&](int io) { return wanted(counts_row(io)); })) {
    const fs::path cd = dir / "counts";
    write_cubes(cd, counts);
    const data::CosmoFlowFiles files = data::CosmoFlowFiles::open((cd / "train" / "*.h5").string());
    const auto plain = plain_reader(files, DType::U16, buf);
    const double t = best_of(3, plain);
    row("    %-48s %12.0f %10.2f\n", "counts 3Dmap: plain HDF5 read", total / t, total * sample_bytes / t / 1e9);
    o.transform.kind = kernels::FusedTransform::Log1p;
    for (int io : ios) {
      const std::string name = counts_row(io);
      if (!wanted(name)) continue;
      map_files = true;
      cf_row(name.c_str(), loader_vs(plain, data::DataFormat::CosmoFlow, cd.string(), io, B, {}));
      map_files = false;
    }
    o.transform = {};
    L.reset();
  }
  // The authors' layout with float32 `3Dmap`, what `mrmf downsample` writes
  // (its coarse copies): the same cubes as float32, through HDF5 and mapped
  // (each sample's NaN/Inf scan on its first read), paired with a plain
  // read of those files.
  if (section("cf")) {
    const fs::path f32 = dir / "float32";
    fs::create_directories(f32 / "train");
    for (size_t f = 0; f < cf.num_files(); ++f) {
      const data::H5File h = data::H5File::open_read(cf.path(f));
      data::write_cosmoflow_file((f32 / "train" / fs::path(cf.path(f)).filename()).string(),
                                 h.read("3Dmap", DType::F32), h.read("unitPar", DType::F32));
    }
    const data::CosmoFlowFiles cf32 = data::CosmoFlowFiles::open((f32 / "train" / "*.h5").string());
    std::vector<char> buf32(static_cast<size_t>(2 * sample_bytes));
    const auto plain_read32 = plain_reader(cf32, DType::F32, buf32);
    const double t = best_of(3, plain_read32);
    row("    %-48s %12.0f %10.2f\n", "float32 3Dmap: plain HDF5 read", total / t, total * 2 * sample_bytes / t / 1e9);
    hdf5_and_mapped_rows(
        [](bool mapped, int io) {
          return std::string("loader") + (mapped ? ", mapped" : "") + ", float32 3Dmap (io_threads " +
                 std::to_string(io) + ")";
        },
        plain_read32, data::DataFormat::CosmoFlow, f32.string(), 2 * sample_bytes);
    L.reset();
  }
  // The same uint16 files chunked a sample per chunk (as h5py writes with
  // chunks=(1, D, H, W, 4)): plain, mapped like contiguous ones since
  // session 40 (H5File::unit_offsets); and gzip-compressed (h5py's default
  // level 4, shuffle off), mapped and decoded by the threads that make a
  // batch (H5File::packed_units, data/packed_chunks.h); and gzip in
  // quarters of a sample ("gzip split": chunks of (1, D/2, H/2, W, 4)), decoded and put
  // in place by the same threads since session 41 (decode_unit); and the
  // same quarters unfiltered ("split"), put together by those threads since
  // session 42. And gzip chunks that each hold rows of two samples ("gzip
  // shared", as h5py's automatic chunking makes them from ~16 samples a
  // file): through HDF5 on the I/O thread until session 47; since session
  // 48 mapped, each sample's chunks inflated whole by the threads that make
  // a batch (twice the inflating of a sample per chunk, said once in an
  // info line with the h5repack command that removes it). Each paired with
  // a plain HDF5 read of the same files (which inflates and gathers on one
  // thread). Those cubes' values (a multiplicative hash) do not compress
  // (ratio 1.0); "gzip counts" is the "gzip" layout over count-like cubes
  // (geometric, mean 8: 2.6:1 at gzip level 4, near the 2.9:1 of `mrmf
  // datagen cosmoflow`'s counts), where inflating costs what it costs on
  // CosmoFlow's data: its epochs take ~5x the others' (0.6 s for a plain
  // read on 2 cores), so it is timed at 1 I/O thread and the most only.
  // "h5py chunks": those cubes in the chunks h5py picks for these files
  // given compression="gzip" alone, (4, D/4, H/4, W/4, 2) for 16 cubes of
  // 64^3 -- 128 chunks a sample, each holding 4 samples: through HDF5 until
  // session 50 (more than 64 chunks a sample), since then mapped (the
  // chunks located at set-up: chunks_worth_locating); its reads through
  // HDF5 run at ~1/5 of "gzip counts"' (~22 samples/s on 2 cores), so it is
  // timed only where --case names it (`--case "h5py chunks"`: the GPU
  // check's whole run keeps to its time limit). A layout none of whose rows
  // --case names is neither written nor timed.
  if (section("cf"))
    for (const auto& [what, opts] : {std::pair<const char*, data::WriteOptions>{"chunked", {1, 0}},
                                     {"gzip", {1, 4}},
                                     {"gzip counts", {1, 4}},
                                     {"gzip split", {0, 4, false, {1, side / 2, side / 2, side, 4}}},
                                     {"split", {0, 0, false, {1, side / 2, side / 2, side, 4}}},
                                     {"gzip shared", {0, 4, false, {2, side / 2, side / 2, side, 4}}},
                                     {"h5py chunks", {0, 4, false, {4, side / 4, side / 4, side / 4, 2}}}}) {
      const std::string w = what;
      const bool of_counts = w == "gzip counts" || w == "h5py chunks";
      const std::vector<int> io_list = of_counts ? std::vector<int>{1, ios.back()} : ios;
      const auto name = [w](bool mapped, int io) {
        return std::string("loader") + (mapped ? ", mapped" : "") + ", " + w + " 3Dmap (io_threads " +
               std::to_string(io) + ")";
      };
      if (std::none_of(io_list.begin(), io_list.end(),
                       [&](int io) { return wanted(name(false, io)) || wanted(name(true, io)); }))
        continue;
      if (w == "h5py chunks" && only_case.empty()) continue;  // named only (below)
      std::string folder = what;
      std::replace(folder.begin(), folder.end(), ' ', '_');
      const fs::path ch = dir / folder;
      fs::create_directories(ch / "train");
      for (size_t f = 0; f < cf.num_files(); ++f) {
        const data::H5File h = data::H5File::open_read(cf.path(f));
        data::H5File c = data::H5File::create((ch / "train" / fs::path(cf.path(f)).filename()).string());
        c.write("3Dmap", of_counts ? cubes(static_cast<int>(f), counts) : h.read("3Dmap"), opts);
        c.write("unitPar", h.read("unitPar"));
      }
      const data::CosmoFlowFiles files = data::CosmoFlowFiles::open((ch / "train" / "*.h5").string());
      const auto plain = plain_reader(files, DType::U16, buf);
      const double t = best_of(3, plain);
      row("    %-48s %12.0f %10.2f\n", (w + " 3Dmap: plain HDF5 read").c_str(), total / t,
          total * sample_bytes / t / 1e9);
      hdf5_and_mapped_rows(name, plain, data::DataFormat::CosmoFlow, ch.string(), sample_bytes, io_list);
      L.reset();
    }
  // CosmoFlow as LBANN stores it: one sample per file, `full` (4, D, H, W)
  // float32 or int16, already channels-first. The same cubes, each paired
  // with a plain read of the same files (open, one read of `full`): the
  // file-open per sample is in both.
  if (section("cf"))
    for (DType dt : {DType::F32, DType::I16}) {
      const fs::path lb = dir / (dt == DType::F32 ? "lbann_f32" : "lbann_i16");
      fs::create_directories(lb / "train");
      std::vector<std::string> paths;
      const int64_t n3 = int64_t(side) * side * side;
      for (size_t f = 0; f < cf.num_files(); ++f) {
        const data::H5File h = data::H5File::open_read(cf.path(f));
        for (int64_t r = 0; r < cf.samples(f); ++r) {
          // [D, H, W, 4] -> [4, D, H, W] (int16 clamps the counts above 32767)
          const Tensor full = h.read_rows("3Dmap", r, 1, DType::F32).view({n3, 4}).transpose(0, 1).contiguous();
          paths.push_back((lb / "train" / ("s" + std::to_string(paths.size()) + ".h5")).string());
          data::write_cosmoflow_lbann_file(paths.back(), data::from_float32(full.view({4, side, side, side}), dt),
                                           Tensor::full({4}, 0.1f));
        }
      }
      const int64_t lb_bytes = int64_t(side) * side * side * 4 * int64_t(dtype_size(dt));
      std::vector<char> lb_buf(static_cast<size_t>(lb_bytes));
      const auto lbann_read = [&] {
        std::lock_guard<std::recursive_mutex> lock(data::hdf5_mutex());
        for (const std::string& p : paths) data::H5File::open_read(p).read_rows_into("full", 0, 4, dt, lb_buf.data());
      };
      const char* tn = dt == DType::F32 ? "float32" : "int16";
      const double t = best_of(3, lbann_read);
      char name[80];
      std::snprintf(name, sizeof name, "LBANN files (%s): plain HDF5 read", tn);
      row("    %-48s %12.0f %10.2f\n", name, double(paths.size()) / t, double(paths.size()) * lb_bytes / t / 1e9);
      hdf5_and_mapped_rows(
          [tn](bool mapped, int io) {
            return std::string("LBANN loader") + (mapped ? ", mapped" : "") + " (" + tn + ", io_threads " +
                   std::to_string(io) + ")";
          },
          lbann_read, data::DataFormat::CosmoFlowLbann, lb.string(), lb_bytes);
      // The rows above time later epochs of one loader; a mapped float32
      // sample's values are checked the first time it is read. The first
      // epoch of fresh loaders, opened (each file opened for its labels
      // and mapped: once per run) before the timing.
      std::snprintf(name, sizeof name, "LBANN mapped (%s, io_threads 1): 1st epoch", tn);
      if (wanted(name)) {
        data::LoaderOptions lo = o;
        lo.memory_map = true;
        lo.prefetch_next_epoch = false;
        std::vector<std::unique_ptr<data::Loader>> fresh, used;
        for (int k = 0; k < kPairs + 1; ++k)
          fresh.push_back(data::open_loader({data::DataFormat::CosmoFlowLbann, lb.string(), data::Split::Train}, lo));
        const auto first_epoch = [&] {
          used.push_back(std::move(L));  // unmapped after the timing, not inside it
          L = std::move(fresh.back());
          fresh.pop_back();
          L->start_epoch(0);
          data::LoaderBatch bt;
          while (L->next(bt)) {
          }
        };
        const Paired pr = paired(kPairs, first_epoch, lbann_read);  // before L is read: it sets L
        paired_row(name, pr, L->samples_per_epoch(), lb_bytes);
        used.clear();
      }
      L.reset();
    }
  // The GPU's path (the training default there): raw uint16 samples read
  // into pinned memory, copied to the device and converted by the fused
  // kernel on it -- the host moves what the plain read moves. The copy and
  // kernel are waited for in next(), or (overlap) issued by the I/O thread;
  // the samples read through HDF5 or copied from the mapped files.
  if (section("cf") && cuda_device_count() > 0)
    for (bool mapped : {false, true})
      for (bool overlap : {false, true}) {
        map_files = mapped;
        std::string name =
            overlap ? "loader -> GPU (copy + kernel on the I/O thread)" : "loader -> GPU (copy + kernel in next())";
        if (mapped) name += ", mapped";
        if (!wanted(name)) continue;
        cf_row(name.c_str(), loader_vs(plain_read, data::DataFormat::CosmoFlow, dir.string(), 1, B, {}, false, -1,
                                       Device::cuda(0), overlap));
        map_files = false;
      }

  // (a2) Neuron Inverter: preloaded shard, batch 128 of (T = 1600, C = 3) float32
  // samples of 19 KB -> [C, T] or [C, T / 2]; each paired with a plain read of
  // the same page-cached file (batch-sized hyperslabs), the issue's
  // yardstick; a memcpy gather of the same raw samples in a shuffled order
  // (what a preloaded loader does every epoch) is shown against the same
  // read, without and with the next sample prefetched (core/prefetch.h). Until
  // session 28 that gather went through the samples in a fixed stride, which
  // the hardware prefetcher follows: 92-95 % against 72-77 % shuffled.
  if (section("ni")) {
    const int64_t ni_n = small ? 1024 : 4096, T = 1600, NB = 128;
    const std::string ni = (dir / "ni.h5").string();
    {
      data::NeuronInverterWriter w(ni, DType::F32);
      w.create_split(data::Split::Train, ni_n, T, 3);
      Tensor fr = Tensor::empty({ni_n, T, 3});
      for (int64_t i = 0; i < fr.numel(); ++i) fr.data<float>()[i] = static_cast<float>(i % 977) * 0.01f;
      w.write(data::Split::Train, 0, fr, Tensor::full({ni_n, 19}, 0.f));
    }
    const int64_t ni_bytes = T * 3 * 4;
    Tensor src = Tensor::empty({ni_n, T, 3}), dst = Tensor::empty({NB, T, 3});
    std::memset(src.raw_data(), 0, src.nbytes());
    std::vector<char> nbuf(static_cast<size_t>(NB * ni_bytes));
    const auto ni_read = [&] {
      std::lock_guard<std::recursive_mutex> lock(data::hdf5_mutex());
      const data::H5File h = data::H5File::open_read(ni);
      for (int64_t r = 0; r + NB <= ni_n; r += NB) h.read_rows_into("train_frames", r, NB, DType::F32, nbuf.data());
    };
    const std::vector<int64_t> order = data::epoch_permutation(ni_n, 1, 0, 0);
    const auto sample_at = [&](int64_t i) {
      return static_cast<const char*>(src.raw_data()) + order[static_cast<size_t>(i)] * ni_bytes;
    };
    const auto ni_gather = [&](bool prefetch) {
      for (int64_t i = 0; i < ni_n; ++i) {
        if (prefetch && i + 1 < ni_n) prefetch_bytes(sample_at(i + 1), static_cast<size_t>(ni_bytes));
        std::memcpy(static_cast<char*>(dst.raw_data()) + (i % NB) * ni_bytes, sample_at(i), ni_bytes);
      }
    };
    const double read_sps = double(ni_n / NB * NB) / best_of(3, ni_read);
    row("    %-48s %12.0f %10.2f\n", "NI: plain HDF5 read, 128-sample hyperslabs", read_sps, read_sps * ni_bytes / 1e9);
    const auto ni_row = [&](const char* name, const Paired& pr, int64_t n) { paired_row(name, pr, n, ni_bytes); };
    const auto gather_plain = [&] { ni_gather(false); };
    const auto gather_prefetched = [&] { ni_gather(true); };
    if (wanted("NI: memcpy gather, shuffled"))
      ni_row("NI: memcpy gather, shuffled", paired(kPairs, gather_plain, ni_read), ni_n);
    if (wanted("NI: memcpy gather, shuffled, next prefetched"))
      ni_row("NI: memcpy gather, shuffled, next prefetched", paired(kPairs, gather_prefetched, ni_read), ni_n);
    // Full resolution: the preloaded shard was converted in place, a batch is a gather.
    for (int io : ios) {
      char name[64];
      std::snprintf(name, sizeof name, "NI loader (T 1600, io_threads %d)", io);
      if (!wanted(name)) continue;
      const Paired pr = loader_vs(ni_read, data::DataFormat::NeuronInverter, ni, io, NB, {});
      ni_row(name, pr, L->samples_per_epoch());
    }
    // The same without the I/O thread (prefetch depth 0): batches made in
    // next(). Against io_threads 1 it shows what the hand-over to the I/O
    // thread costs when nothing else runs (this benchmark's consumer does no
    // work, a trainer computes meanwhile); against the memcpy gather, the
    // per-batch cost of the loader's own bookkeeping.
    // Synchronous batches are gathered (or reduced) by the caller's OpenMP
    // threads, which wait for them anyway.
    if (wanted("NI loader (T 1600, synchronous: no I/O thread)")) {
      const Paired pr = loader_vs(ni_read, data::DataFormat::NeuronInverter, ni, 1, NB, {}, false, 0);
      ni_row("NI loader (T 1600, synchronous: no I/O thread)", pr, L->samples_per_epoch());
    }
    if (wanted("NI loader (T 1600 -> 800, synchronous)")) {
      const Paired pr = loader_vs(ni_read, data::DataFormat::NeuronInverter, ni, 1, NB, {2}, false, 0);
      ni_row("NI loader (T 1600 -> 800, synchronous)", pr, L->samples_per_epoch());
    }
    if (kernels::rows_avx512() &&
        wanted("NI loader (T 1600 -> 800, synchronous, no AVX-512)")) {  // the pair sums' AVX-512 path off
                                                                         // (kernels/rows_avx512.h), side by side
      kernels::set_rows_avx512(false);
      const Paired pr = loader_vs(ni_read, data::DataFormat::NeuronInverter, ni, 1, NB, {2}, false, 0);
      kernels::set_rows_avx512(true);
      ni_row("NI loader (T 1600 -> 800, synchronous, no AVX-512)", pr, L->samples_per_epoch());
    }
    for (int io : ios) {
      char name[64];
      std::snprintf(name, sizeof name, "NI loader (T 1600 -> 800, io_threads %d)", io);
      if (!wanted(name)) continue;
      const Paired pr = loader_vs(ni_read, data::DataFormat::NeuronInverter, ni, io, NB, {2});
      ni_row(name, pr, L->samples_per_epoch());
    }
    if (cuda_device_count() > 0)
      for (bool overlap : {false, true}) {
        const char* name = overlap ? "NI loader -> GPU (copy on the I/O thread)" : "NI loader -> GPU (copy in next())";
        if (!wanted(name)) continue;
        const Paired pr = loader_vs(ni_read, data::DataFormat::NeuronInverter, ni, 1, NB, {}, false, -1,
                                    Device::cuda(0), overlap);
        ni_row(name, pr, L->samples_per_epoch());
      }
    // Training's steady state: from the second epoch on, the reduced
    // samples come from the in-memory cache (a gather of 9.6 KB samples,
    // half the bytes of the read it is compared with).
    if (wanted("NI loader, later epochs (cached)")) {
      const Paired pr = loader_vs(ni_read, data::DataFormat::NeuronInverter, ni, 1, NB, {2}, /*cache=*/true);
      ni_row("NI loader, later epochs (cached)", pr, L->samples_per_epoch());
    }
  }

  // (b) fused kernel vs memcpy of the same bytes (bench/bench_data/kernel_rows.cpp).
  if (section("kernel")) kernel_rows({B, side_b, wanted, ab_var, ab_a, ab_b});

  // (c) prefetch under a simulated compute step of 1.5x the I/O time per
  // batch, 4 epochs of one loader each, with and without prefetching across
  // the epoch boundary.
  std::unique_ptr<data::Loader> P;
  if (section("prefetch")) {
    const double io_per_batch = t_sample * B;
    const auto compute = std::chrono::duration<double>(1.5 * io_per_batch);
    o.cache_in_memory = false;
    o.io_threads = 1;
    row("\n(c) prefetch vs simulated compute of %.1f ms/batch   %9s %9s %9s %9s\n", compute.count() * 1e3, "epoch s",
        "wait s", "wait %", "ep1-3 %");
    struct Mode {
      int depth;
      bool next_epoch;
    };
    for (const Mode m : {Mode{0, false}, Mode{2, false}, Mode{2, true}}) {
      o.prefetch_depth = m.depth;
      o.prefetch_next_epoch = m.next_epoch;
      P = data::open_loader({data::DataFormat::CosmoFlow, dir.string(), data::Split::Train}, o);
      double ep_all = 0, wait_all = 0, ep_later = 0, wait_later = 0;
      for (int e = 0; e < 4; ++e) {
        const auto t0 = Clock::now();
        P->start_epoch(e);
        data::LoaderBatch b;
        while (P->next(b)) std::this_thread::sleep_for(compute);
        const double ep = secs(t0);
        ep_all += ep;
        wait_all += P->wait_seconds();
        if (e > 0) {
          ep_later += ep;
          wait_later += P->wait_seconds();
        }
      }
      char name[64];
      std::snprintf(name, sizeof name, "depth %d%s, 4 epochs", m.depth, m.next_epoch ? " + next epoch" : "");
      row("    %-48s %9.3f %9.3f %8.1f%% %8.1f%%\n", name, ep_all, wait_all, 100 * wait_all / ep_all,
          100 * wait_later / ep_later);
    }
  }
  L.reset();
  P.reset();
  fs::remove_all(dir);
  if (!out.empty()) {
    FILE* f = std::fopen(out.c_str(), "w");
    if (f) {
      std::fputs(table().c_str(), f);
      std::fclose(f);
    }
  }
  return 0;
}
