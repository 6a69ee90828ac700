// What locating a dataset's chunks costs in the HDF5 this build links
// (not asserted). The loaders find each chunk of a file they decode
// themselves with H5Dget_chunk_info_by_coord (H5File::packed_units), which
// in HDF5 1.10.8 walks the chunk index until it meets the chunk: a lookup
// costs time proportional to the dataset's chunk count, all of them its
// square. chunks_worth_locating (data/packed_chunks.h) models that as
// ~8 ns x n^2; this measures it, beside H5Dget_chunk_storage_size (a
// B-tree descent: what a lookup could cost) on the same chunks, and the
// whole packed_units() set-up where the rule lets it run.
//
//   bench_chunk_index [max_chunks=32768]
//
// For each chunk count n (1024, doubling, up to max_chunks): a uint16
// dataset of n rows of 64 elements, a row per chunk, gzip level 1
// (what h5py writes: a v1 B-tree index), in a temporary file.
#include <hdf5.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/h5file.h"
#include "data/packed_chunks.h"

using namespace mrmf;
namespace fs = std::filesystem;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t max_chunks = argc > 1 ? std::atoll(argv[1]) : 32768;
  if (max_chunks < 1024) {
    std::fprintf(stderr, "bench_chunk_index: max_chunks must be at least 1024, got %s\n", argv[1]);
    return 2;
  }
  const fs::path dir = fs::temp_directory_path() / ("mrmf_bench_chunk_index_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::printf("HDF5 %u.%u.%u; a row of 64 uint16 a chunk, gzip 1\n", H5_VERS_MAJOR, H5_VERS_MINOR, H5_VERS_RELEASE);
  std::printf("%8s %14s %14s %12s %14s %16s\n", "chunks", "by_coord us", "ns/chunk", "size us", "model 8n^2 s",
              "packed_units s");
  for (int64_t n = 1024; n <= max_chunks; n *= 2) {
    const std::string path = (dir / ("c" + std::to_string(n) + ".h5")).string();
    {
      Tensor x = Tensor::empty({n, 64}, DType::U16);
      uint16_t* p = x.data<uint16_t>();
      for (int64_t i = 0; i < x.numel(); ++i) p[i] = static_cast<uint16_t>((i * 2654435761u) >> 7);
      data::H5File f = data::H5File::create(path);
      f.write("d", x, data::WriteOptions{1, 1});
    }
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    const hid_t d = H5Dopen2(file, "d", H5P_DEFAULT);
    hsize_t coord[2] = {0, 0};
    unsigned mask = 0;
    haddr_t addr = 0;
    hsize_t bytes = 0;
    // Every chunk's place by its coordinates, then every chunk's size.
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t c = 0; c < n; ++c) {
      coord[0] = static_cast<hsize_t>(c);
      H5Dget_chunk_info_by_coord(d, coord, &mask, &addr, &bytes);
    }
    const double by_coord = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    for (int64_t c = 0; c < n; ++c) {
      coord[0] = static_cast<hsize_t>(c);
      H5Dget_chunk_storage_size(d, coord, &bytes);
    }
    const double by_size = seconds_since(t0);
    H5Dclose(d);
    H5Fclose(file);
    const bool worth = data::chunks_worth_locating(static_cast<double>(n), 128, 1, true);
    double packed = -1;
    if (worth) {
      t0 = std::chrono::steady_clock::now();
      const auto p = data::H5File::open_read(path).packed_units("d", DType::U16, 1);
      packed = seconds_since(t0);
      if (static_cast<int64_t>(p.units.size()) != n) std::fprintf(stderr, "packed_units found %zu\n", p.units.size());
    }
    char packed_text[32] = "(not located)";
    if (packed >= 0) std::snprintf(packed_text, sizeof packed_text, "%.3f", packed);
    std::printf("%8lld %14.2f %14.2f %12.2f %14.3f %16s\n", static_cast<long long>(n), by_coord / n * 1e6,
                by_coord / n / n * 1e9, by_size / n * 1e6, data::chunk_lookup_seconds(static_cast<double>(n)),
                packed_text);
    fs::remove(path);
  }
  fs::remove_all(dir);
  return 0;
}
