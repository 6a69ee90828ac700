// A CosmoFlow loader over your own files, mapped and decoded by its threads
// against read through HDF5 (not asserted): whether the loader's own
// reading pays on a file layout, and what its set-up costs.
//
//   bench_loader_files DIR [batch=4] [epochs=2] [rounds=3] [io_threads=1]
//
// DIR holds train/*.h5 in the authors' layout (`3Dmap`, `unitPar`). Each
// round opens a loader with memory_map off, then on (alternating, so that
// both see the same machine), the in-memory cache off (every epoch reads
// the files), and times its opening (mapping, locating chunks, checking
// one sample each way; a file's chunks are located once per process:
// data/located_chunks.h) and `epochs` shuffled epochs (0: the opening
// alone). The loader's info
// lines (layout advice, the shared-chunk notice) are printed as they come.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "data/loader.h"

using namespace mrmf;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_loader_files DIR [batch=4] [epochs=2] [rounds=3] [io_threads=1]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const auto arg = [&](int i, int dflt) { return argc > i ? std::atoi(argv[i]) : dflt; };
  const int batch = arg(2, 4), epochs = arg(3, 2), rounds = arg(4, 3), io = arg(5, 1);
  if (batch < 1 || epochs < 0 || rounds < 1 || io < 1) {
    std::fprintf(stderr, "bench_loader_files: batch, rounds and io_threads must be positive, epochs not negative\n");
    return 2;
  }
  using Clock = std::chrono::steady_clock;
  const auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  try {
    std::printf("%s: batch %d, %d epochs a round, io_threads %d\n", dir.c_str(), batch, epochs, io);
    std::printf("%6s %-8s %10s %10s %12s\n", "round", "read", "open s", "samples", "samples/s");
    for (int round = 0; round < rounds; ++round)
      for (bool map : {false, true}) {
        data::LoaderOptions o;
        o.batch_size = batch;
        o.io_threads = io;
        o.memory_map = map;
        o.cache_in_memory = false;
        auto t = Clock::now();
        auto L = data::open_loader({data::DataFormat::CosmoFlow, dir, data::Split::Train}, o);
        const double open_s = since(t);
        int64_t n = 0;
        t = Clock::now();
        for (int e = 0; e < epochs; ++e) {
          L->start_epoch(e);
          data::LoaderBatch b;
          while (L->next(b)) n += b.x.shape()[0];
        }
        const double s = since(t);
        std::printf("%6d %-8s %10.3f %10lld %12.1f\n", round, map ? "mapped" : "HDF5", open_s,
                    static_cast<long long>(n), n > 0 ? static_cast<double>(n) / s : 0.0);
      }
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_loader_files: %s\n", e.message().c_str());
    return 1;
  }
  return 0;
}
