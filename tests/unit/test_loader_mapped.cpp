// Loaders over files mapped into memory (data.memory_map): CosmoFlow and LBANN
// files mapped, decoded or put together from chunks give the batches HDF5
// reads, values checked once per sample; the process's mapping limit; batches
// from RAM or mappings made while another thread holds the HDF5 lock.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <limits>
#include <mutex>
#include <thread>
#include <tuple>

#include "core/error.h"
#include "data/cache_budget.h"
#include "data/formats.h"
#include "data/h5file.h"
#include "data/loader.h"
#include "data/prefetch.h"
#include "data/shuffle.h"
#include "kernels/fused_downsample_ops.h"
#include "support/loader_fixtures.h"
#include "support/log_lines.h"
#include "support/temp_dir.h"

using namespace mrmf;
using namespace mrmf::data;
namespace fs = std::filesystem;

using namespace mrmf::test::loader;

namespace {
// Batches of 2 in chunks of `chunk_bytes`, each chunk counted in `chunks`.
LoaderOptions counting_options(uint64_t seed, int io_threads, bool map, bool cache, int64_t chunk_bytes,
                               std::atomic<int>& chunks) {
  LoaderOptions o;
  o.batch_size = 2;
  o.seed = seed;
  o.io_threads = io_threads;
  o.memory_map = map;
  o.cache_in_memory = cache;
  o.chunk_bytes = chunk_bytes;
  o.on_chunk = [&chunks](int64_t, int64_t) { ++chunks; };
  return o;
}
}  // namespace

TEST_CASE("loader: CosmoFlow files mapped into memory, and those that are not", "[loader]") {
  // Mapped files are read like a preloaded shard: the first epoch's batches
  // are made in chunks from RAM (on_chunk sees them); contiguous uint16,
  // int16 and float32 files (`mrmf downsample` writes float32) are mapped,
  // and so are chunked ones whose chunks hold whole samples; gzip-compressed
  // ones with a sample per chunk, or a sample over several (partial ones at
  // the edges; also unfiltered), or chunks of two samples (h5py's automatic
  // chunks; also unfiltered ones that split them), are mapped and decoded or
  // put together by the threads that make the batch (but not served in
  // place: caching() stays false), compressed chunks of several samples with
  // a notice of the work that costs; a big-endian `3Dmap` is read through
  // HDF5 (no chunk before the cache holds the samples). Every way gives the
  // same batches.
  Tmp d;
  write_cf(d / "contig", 2, 4, 4);
  for (const char* dir : {"chunked", "chunked3", "gzip", "gzip_shuffle", "gzip2", "gzip_split", "split", "split2",
                          "h5py_auto", "h5py_auto3"})
    fs::create_directories(d / dir);
  fs::create_directories(d / "float");
  fs::create_directories(d / "int16");
  fs::create_directories(d / "bigendian");
  for (const char* name : {"c00.h5", "c01.h5"}) {
    H5File in = H5File::open_read((d / "contig") + "/" + name);
    const Tensor x = in.read("3Dmap"), y = in.read("unitPar");
    H5File c = H5File::create((d / "chunked") + "/" + name);
    c.write("3Dmap", x, WriteOptions{1, 0});  // one sample per chunk
    c.write("unitPar", y);
    c.close();
    for (const auto& [dir, opts] : {std::pair<const char*, WriteOptions>{"chunked3", {3, 0}},  // 4 samples: 3 + 1
                                    {"gzip", {1, 1}},
                                    {"gzip_shuffle", {1, 4, true}},
                                    {"gzip2", {2, 1}},
                                    {"gzip_split", {0, 1, false, {1, 2, 4, 3, 4}}},  // four a sample, two partial
                                    {"split", {0, 0, false, {1, 2, 4, 3, 4}}},       // the same, unfiltered
                                    {"split2", {0, 0, false, {2, 2, 4, 4, 4}}},      // and two samples a chunk
                                    // h5py's automatic kind: two samples a chunk, 128 chunks a sample
                                    // (more than the 64 the loaders took until session 50)
                                    {"h5py_auto", {0, 1, false, {2, 1, 1, 2, 1}}},
                                    {"h5py_auto3", {0, 1, false, {3, 1, 1, 2, 1}}}}) {  // 3 + 1 samples
      H5File g = H5File::create((d / dir) + "/" + name);
      g.write("3Dmap", x, opts);
      g.write("unitPar", y);
      g.close();
    }
    write_cosmoflow_file((d / "float") + "/" + name, to_float32(x), y);
    write_cosmoflow_file((d / "int16") + "/" + name, from_float32(to_float32(x), DType::I16), y);
    // Big-endian uint16, through the HDF5 C API (mrmf writes little-endian only).
    const hid_t f = H5Fcreate(((d / "bigendian") + "/" + name).c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(f >= 0);
    for (const auto& [dset, t, file_type, mem_type] :
         {std::tuple<const char*, const Tensor*, hid_t, hid_t>{"3Dmap", &x, H5T_STD_U16BE, H5T_NATIVE_UINT16},
          {"unitPar", &y, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT}}) {
      std::vector<hsize_t> dims;
      for (int64_t v : t->shape().vec()) dims.push_back(static_cast<hsize_t>(v));
      const hid_t sp = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
      const hid_t ds = H5Dcreate2(f, dset, file_type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      REQUIRE(H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, t->raw_data()) >= 0);
      H5Dclose(ds);
      H5Sclose(sp);
    }
    H5Fclose(f);
  }
  // A shard of one contiguous and one chunked file is mapped; of one
  // contiguous and one compressed file, mapped and decoded (raw_ptr()
  // serves every sample or none).
  fs::create_directories(d / "mixed");
  fs::copy_file(d / "contig/c00.h5", d / "mixed/c00.h5");
  fs::copy_file(d / "chunked/c01.h5", d / "mixed/c01.h5");
  fs::create_directories(d / "mixed_gzip");
  fs::copy_file(d / "contig/c00.h5", d / "mixed_gzip/c00.h5");
  fs::copy_file(d / "gzip/c01.h5", d / "mixed_gzip/c01.h5");
  fs::create_directories(d / "mixed_split");  // a sample an entry, and four entries a sample
  fs::copy_file(d / "contig/c00.h5", d / "mixed_split/c00.h5");
  fs::copy_file(d / "gzip_split/c01.h5", d / "mixed_split/c01.h5");
  fs::create_directories(d / "mixed_auto");  // a sample an entry, and chunk entries shared by two samples
  fs::copy_file(d / "contig/c00.h5", d / "mixed_auto/c00.h5");
  fs::copy_file(d / "h5py_auto/c01.h5", d / "mixed_auto/c01.h5");
  const H5File contig = H5File::open_read(d / "contig/c00.h5");
  CHECK(contig.contiguous_offset("3Dmap", DType::U16) > 0);
  CHECK(contig.contiguous_offset("3Dmap", DType::I16) == -1);  // another type
  CHECK(H5File::open_read(d / "chunked/c00.h5").contiguous_offset("3Dmap", DType::U16) == -1);
  CHECK(H5File::open_read(d / "chunked/c00.h5").unit_offsets("3Dmap", DType::U16, 1).size() == 4);
  CHECK(H5File::open_read(d / "gzip/c00.h5").unit_offsets("3Dmap", DType::U16, 1).empty());
  CHECK(H5File::open_read(d / "gzip/c00.h5").packed_units("3Dmap", DType::U16, 1).units.size() == 4);
  CHECK(H5File::open_read(d / "gzip2/c00.h5").packed_units("3Dmap", DType::U16, 1).units.size() == 2);  // shared
  CHECK(H5File::open_read(d / "gzip2/c00.h5").packed_units("3Dmap", DType::U16, 1).units_per_chunk == 2);
  CHECK(H5File::open_read(d / "h5py_auto/c00.h5").packed_units("3Dmap", DType::U16, 1).units.size() == 2 * 128);
  CHECK(H5File::open_read(d / "bigendian/c00.h5").contiguous_offset("3Dmap", DType::U16) == -1);
  CHECK(H5File::open_read(d / "bigendian/c00.h5").unit_offsets("3Dmap", DType::U16, 1).empty());

  std::vector<Tensor> want;
  std::vector<int64_t> want_ids;
  for (const char* dir :
       {"contig", "chunked", "chunked3", "gzip", "gzip_shuffle", "gzip2", "gzip_split", "split", "split2", "h5py_auto",
        "h5py_auto3", "float", "int16", "bigendian", "mixed", "mixed_gzip", "mixed_split", "mixed_auto"})
    for (bool map : {true, false})
      for (int io : {1, 3})
        for (int64_t chunk_bytes : {int64_t{1}, int64_t{1} << 30}) {  // a sample per chunk: threads decode at once
          INFO(dir << " memory_map " << map << " io_threads " << io << " chunk_bytes " << chunk_bytes);
          std::atomic<int> chunks{0};
          LoaderOptions o = counting_options(7, io, map, false, chunk_bytes, chunks);
          test::LogLines log;
          auto L = open_loader({DataFormat::CosmoFlow, d / dir, Split::Train}, o);
          std::vector<Tensor> xs;
          const auto ids = epoch_ids(*L, 0, &xs);
          const std::string name = dir;
          const bool mappable = name != "bigendian";
          // Compressed chunks of two samples: the loader says once what they
          // cost, with the h5repack command that stores a sample per chunk.
          const bool noticed = map && (name == "gzip2" || name == "h5py_auto" || name == "mixed_auto");
          CHECK(log.count("each holding 2 samples: the loader's threads inflate a whole chunk to read each of its "
                          "samples, 2 times the work of a sample per chunk. `h5repack -l 3Dmap:CHUNK=1x4x4x4x4 IN.h5 "
                          "OUT.h5`") == (noticed ? 1 : 0));
          CHECK(log.count("a chunk holds rows of several samples") == 0);
          const bool decoded = name == "gzip" || name == "gzip_shuffle" || name == "gzip2" || name == "gzip_split" ||
                               name == "split" || name == "split2" || name == "h5py_auto" || name == "h5py_auto3" ||
                               name == "mixed_gzip" || name == "mixed_split" || name == "mixed_auto";
          CHECK((chunks > 0) == (map && mappable));
          CHECK(L->caching() == (map && mappable && !decoded));
          if (want.empty()) {
            want = xs;
            want_ids = ids;
          }
          REQUIRE(ids == want_ids);
          for (size_t i = 0; i < xs.size(); ++i) REQUIRE(same(xs[i], want[i]));
        }
  // A corrupt compressed chunk (sample 2 of c01.h5, past the first sample
  // that the mapping is checked on): the batch that reads it fails naming
  // the file, mapped or through HDF5, and the loader goes on.
  {
    const std::string path = d / "gzip/c01.h5";
    const auto units = H5File::open_read(path).packed_units("3Dmap", DType::U16, 1).units;
    REQUIRE(units.size() == 4);
    const PackedUnit u = units[2];
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    for (int64_t b = 2; b < u.bytes; b += 3) {
      char c = 0;
      f.seekg(u.offset + b);
      f.get(c);
      f.seekp(u.offset + b);
      f.put(static_cast<char>(c ^ 0x5a));
    }
    f.close();
    for (bool map : {true, false})
      for (int io : {1, 3}) {
        INFO("memory_map " << map << " io_threads " << io);
        LoaderOptions o;
        o.batch_size = 2;
        o.shuffle = false;
        o.io_threads = io;
        o.memory_map = map;
        auto L = open_loader({DataFormat::CosmoFlow, d / "gzip", Split::Train}, o);
        L->start_epoch(0);
        LoaderBatch b;
        for (int k = 0; k < 3; ++k) REQUIRE(L->next(b));  // c00's 4 samples, c01's first 2
        REQUIRE_THAT(err([&] { L->next(b); }), Catch::Contains("c01.h5") && Catch::Contains("corrupt"));
        REQUIRE(!L->next(b));
      }
  }
}

TEST_CASE("loader: LBANN files mapped into memory give the same batches, values checked once per sample", "[loader]") {
  // One (4, 4, 4, 4) sample per file, float32 and int16, contiguous and
  // chunked whole (mapped unless memory_map is off), gzip-compressed whole
  // (mapped and decoded), and compressed a channel per chunk (mapped, each
  // sample decoded from its four chunks).
  Tmp d;
  enum class Store { Contiguous, Chunked, Gzip, GzipRows };
  const auto lbann_dir = [&](const std::string& name, DType dt, Store store, int bad_file = -1, float bad = 0) {
    const std::string dir = d / name;
    fs::create_directories(dir);
    for (int i = 0; i < 6; ++i) {
      Tensor full = Tensor::empty({4, 4, 4, 4});
      for (int64_t e = 0; e < full.numel(); ++e) full.data<float>()[e] = float((i * 7 + e) % 50);
      if (i == bad_file) full.data<float>()[77] = bad;
      Tensor lab = Tensor::full({4}, 0.f);
      lab.data<float>()[0] = float(i);
      const std::string path = dir + "/s" + std::to_string(i) + ".h5";
      if (store == Store::Contiguous) {
        write_cosmoflow_lbann_file(path, from_float32(full, dt), lab);
        continue;
      }
      H5File c = H5File::create(path);
      c.write("full", from_float32(full, dt),
              store == Store::Chunked ? WriteOptions{4, 0} : WriteOptions{store == Store::Gzip ? 4 : 1, 1});
      c.write("unitPar", lab);
      c.close();
    }
    return dir;
  };
  for (DType dt : {DType::F32, DType::I16}) {
    const std::string contig = lbann_dir(std::string("contig_") + dtype_name(dt), dt, Store::Contiguous);
    const std::string chunked = lbann_dir(std::string("chunked_") + dtype_name(dt), dt, Store::Chunked);
    const std::string gzip = lbann_dir(std::string("gzip_") + dtype_name(dt), dt, Store::Gzip);
    const std::string gzip_rows = lbann_dir(std::string("gzip_rows_") + dtype_name(dt), dt, Store::GzipRows);
    for (auto tr : {kernels::FusedTransform::None, kernels::FusedTransform::Log1p})
      for (const std::vector<int64_t>& reduce : {std::vector<int64_t>{}, std::vector<int64_t>{2, 2, 2}}) {
        std::vector<Tensor> want;
        std::vector<int64_t> want_ids;
        for (const std::string& dir : {contig, chunked, gzip, gzip_rows})
          for (bool map : {true, false})
            for (int io : {1, 3})
              for (bool cache : {false, true}) {
                INFO(dir << " log1p " << (tr == kernels::FusedTransform::Log1p) << " reduce " << reduce.size()
                         << " memory_map " << map << " io_threads " << io << " cache " << cache);
                std::atomic<int> chunks{0};
                LoaderOptions o = counting_options(3, io, map, cache, 1, chunks);  // a sample per chunk
                o.reduce = reduce;
                o.transform.kind = tr;
                auto L = open_loader({DataFormat::CosmoFlowLbann, dir, Split::Train}, o);
                if (!cache)  // mapped in place: read like a preloaded shard
                  CHECK(L->caching() == (map && (dir == contig || dir == chunked)));
                std::vector<Tensor> xs;
                std::vector<int64_t> ids = epoch_ids(*L, 0, &xs);
                // Mapped (and decoded where compressed a sample per chunk):
                // the first epoch's batches made from RAM. (With the cache,
                // the next epoch's, made from it, may have begun.)
                if (!cache) CHECK((chunks > 0) == map);
                const std::vector<int64_t> ids1 = epoch_ids(*L, 1, &xs);
                ids.insert(ids.end(), ids1.begin(), ids1.end());
                if (want.empty()) {
                  want = xs;
                  want_ids = ids;
                }
                REQUIRE(ids == want_ids);
                REQUIRE(xs.size() == want.size());
                for (size_t i = 0; i < xs.size(); ++i) REQUIRE(same(xs[i], want[i]));
              }
      }
  }
  // A NaN in a mapped float32 file, and a value <= -1 under log1p in a mapped
  // int16 one: the batch that reads the sample fails naming the file, the
  // dataset and the value, in every epoch that reads it (a failed check is
  // not remembered as passed), and the loader goes on.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::string nan_dir = lbann_dir("nan", DType::F32, Store::Contiguous, 3, nan);
  const std::string neg_dir = lbann_dir("neg", DType::I16, Store::Contiguous, 3, -5.f);
  // The same, compressed: decoded and checked every time it is read.
  const std::string nan_gz = lbann_dir("nan_gz", DType::F32, Store::Gzip, 3, nan);
  const std::string neg_gz = lbann_dir("neg_gz", DType::I16, Store::Gzip, 3, -5.f);
  // Also with the cache on and 1/8 (a mapped sample's reduced copy cached).
  for (const auto& [dir, log1p, what, decoded] :
       {std::make_tuple(nan_dir, false, "non-finite", false), std::make_tuple(neg_dir, true, "value -5", false),
        std::make_tuple(nan_gz, false, "non-finite", true), std::make_tuple(neg_gz, true, "value -5", true)})
    for (bool map : {true, false})
      for (int io : {1, 2, 3})
        for (int cache : {0, 1, 2}) {  // off; on with 1/8 (float32 cache); on at full resolution (int16: raw cache)
          INFO(dir << " memory_map " << map << " io_threads " << io << " cache " << cache);
          LoaderOptions o;
          o.batch_size = 2;
          o.shuffle = false;
          o.io_threads = io;
          o.memory_map = map;
          o.cache_in_memory = cache > 0;
          if (cache == 1) o.reduce = {2, 2, 2};
          if (log1p) o.transform.kind = kernels::FusedTransform::Log1p;
          std::atomic<int> chunks{0};
          o.on_chunk = [&](int64_t, int64_t) { ++chunks; };
          auto L = open_loader({DataFormat::CosmoFlowLbann, dir, Split::Train}, o);
          if (!cache) CHECK(L->caching() == (map && !decoded));
          for (int64_t e = 0; e < 2; ++e) {
            L->start_epoch(e);
            LoaderBatch b;
            REQUIRE(L->next(b));  // samples 0 and 1
            REQUIRE_THAT(err([&] { L->next(b); }),
                         Catch::Contains("s3.h5") && Catch::Contains("'full'") && Catch::Contains(what));
            REQUIRE(L->next(b));  // samples 4 and 5
            REQUIRE(b.y.at({0, 0}) == 4.f);
            REQUIRE(!L->next(b));
          }
          if (!cache) CHECK((chunks > 0) == map);  // mapped (decoded where compressed): batches made from RAM
        }
}

TEST_CASE("loader: the process's loaders map at most MRMF_MAX_MAPPED_FILES files", "[loader]") {
  // Six one-sample LBANN files per loader: a limit of 6 maps one loader's
  // shard, not a second one's while the first lives; a shard that would pass
  // the limit is read through HDF5 and gives the same batches.
  Tmp d;
  fs::create_directories(d / "lb");
  for (int i = 0; i < 6; ++i) {
    Tensor full = Tensor::full({4, 4, 4, 4}, float(i));
    Tensor lab = Tensor::full({4}, float(i));
    write_cosmoflow_lbann_file(d / ("lb/s" + std::to_string(i) + ".h5"), full, lab);
  }
  struct EnvGuard {
    ~EnvGuard() { ::unsetenv("MRMF_MAX_MAPPED_FILES"); }
  } guard;
  LoaderOptions o;
  o.batch_size = 2;
  o.cache_in_memory = false;
  const auto open = [&] { return open_loader({DataFormat::CosmoFlowLbann, d / "lb", Split::Train}, o); };
  ::setenv("MRMF_MAX_MAPPED_FILES", "5", 1);
  auto over = open();
  CHECK(!over->caching());
  std::vector<Tensor> x_hdf5, x_mapped;
  const auto ids = epoch_ids(*over, 0, &x_hdf5);
  over.reset();
  ::setenv("MRMF_MAX_MAPPED_FILES", "6", 1);
  {
    auto first = open();
    CHECK(first->caching());
    REQUIRE(epoch_ids(*first, 0, &x_mapped) == ids);
    for (size_t i = 0; i < x_hdf5.size(); ++i) REQUIRE(same(x_hdf5[i], x_mapped[i]));
    auto second = open();  // the first holds all 6
    CHECK(!second->caching());
  }
  CHECK(open()->caching());  // released with the loaders
  for (const char* bad : {"many", "-1", "12x"}) {
    ::setenv("MRMF_MAX_MAPPED_FILES", bad, 1);
    REQUIRE_THAT(err(open), Catch::Contains("MRMF_MAX_MAPPED_FILES='" + std::string(bad) + "'") &&
                                Catch::Contains("expected a number of files"));
  }
  ::setenv("MRMF_MAX_MAPPED_FILES", "0", 1);
  CHECK(!open()->caching());
}

TEST_CASE("loader: batches from RAM or mapped files are made while another thread holds the HDF5 lock", "[loader]") {
  // A checkpoint written on the training thread holds the process's HDF5
  // lock. Batches that call no HDF5 -- a preloaded Neuron Inverter shard,
  // mapped CosmoFlow files, contiguous or gzip-compressed -- are made
  // meanwhile, synchronous or prefetched; a shard read through HDF5 waits
  // for the lock, and then gives the same batches as the mapped one.
  Tmp d;
  write_cf(d / "cf", 2, 4, 4);
  write_ni(d / "ni.h5", 8, 16);
  fs::create_directories(d / "gzip");
  for (const char* name : {"/c00.h5", "/c01.h5"}) {
    const H5File in = H5File::open_read((d / "cf") + name);
    H5File g = H5File::create((d / "gzip") + name);
    g.write("3Dmap", in.read("3Dmap"), WriteOptions{1, 1});
    g.write("unitPar", in.read("unitPar"));
  }
  // Holds hdf5_mutex() on its own thread until release() (or destruction).
  struct LockHolder {
    std::promise<void> held, let_go;
    bool released = false;
    std::thread t;
    LockHolder() {
      t = std::thread([this, go = let_go.get_future()] {
        std::lock_guard<std::recursive_mutex> l(hdf5_mutex());
        held.set_value();
        go.wait();
      });
      held.get_future().wait();
    }
    void release() {
      if (!released) let_go.set_value();
      released = true;
    }
    ~LockHolder() {
      release();
      t.join();
    }
  };
  for (int depth : {0, 2}) {
    CAPTURE(depth);
    LoaderOptions o;
    o.batch_size = 2;
    o.seed = 5;
    o.prefetch_depth = depth;
    o.cache_in_memory = false;
    auto ni = open_loader({DataFormat::NeuronInverter, d / "ni.h5", Split::Train}, o);
    auto mapped = open_loader({DataFormat::CosmoFlow, d / "cf", Split::Train}, o);
    auto gzip = open_loader({DataFormat::CosmoFlow, d / "gzip", Split::Train}, o);
    o.memory_map = false;
    auto through_hdf5 = open_loader({DataFormat::CosmoFlow, d / "cf", Split::Train}, o);
    REQUIRE(mapped->caching());
    REQUIRE(!through_hdf5->caching());
    LockHolder lock;  // after the loaders: let go before they close their files
    // An epoch on another thread, waited for at most `limit`.
    const auto epoch = [](Loader& L) { return std::async(std::launch::async, [&L] { return epoch_ids(L, 0); }); };
    std::vector<int64_t> mapped_ids;
    for (Loader* L : {ni.get(), mapped.get(), gzip.get()}) {
      auto f = epoch(*L);
      const bool done = f.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
      if (!done) lock.release();  // to fail, not hang
      REQUIRE(done);
      const auto ids = f.get();
      REQUIRE(ids.size() == 8);
      if (L == mapped.get()) mapped_ids = ids;
    }
    auto f = epoch(*through_hdf5);
    CHECK(f.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout);
    lock.release();
    CHECK(f.get() == mapped_ids);
  }
}

TEST_CASE("loader: a dataset behind an HDF5 external link is read through HDF5, not mapped", "[loader]") {
  // `3Dmap` (or LBANN's `full`) stored in another file and reached through
  // an external link: its storage addresses are the other file's. Mapping
  // them in the linking file read other bytes -- here a pad of 60000s --
  // and trained on them without an error. Contiguous, chunked and
  // gzip-compressed targets; every way must give the unlinked batches.
  Tmp d;
  write_cf(d / "plain", 2, 4, 4);
  const auto link = [](const std::string& from, const std::string& name, const std::string& to) {
    const hid_t f = H5Fopen(from.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    REQUIRE(f >= 0);
    REQUIRE(H5Lcreate_external(to.c_str(), ("/" + name).c_str(), f, name.c_str(), H5P_DEFAULT, H5P_DEFAULT) >= 0);
    H5Fclose(f);
  };
  const Tensor pad = Tensor::full({1 << 16}, 60000.f);
  for (const auto& [store, opts] :
       {std::pair<const char*, WriteOptions>{"contiguous", {}}, {"chunked", {1, 0}}, {"gzip", {1, 1}}}) {
    INFO(store);
    const std::string dir = d / (std::string("linked_") + store), raw = d / (std::string("raw_") + store);
    fs::create_directories(dir);
    fs::create_directories(raw);
    fs::copy_file(d / "plain/c00.h5", dir + "/c00.h5");  // the first file, the one the mapping is checked on, is plain
    const H5File src = H5File::open_read(d / "plain/c01.h5");
    {
      H5File r = H5File::create(raw + "/c01.h5");
      r.write("pad", from_float32(Tensor::full({3000}, 1.f), DType::U16));  // the two files' offsets differ
      r.write("3Dmap", src.read("3Dmap"), opts);
      r.close();
      H5File l = H5File::create(dir + "/c01.h5");
      l.write("pad", from_float32(pad, DType::U16));
      l.write("unitPar", src.read("unitPar"));
      l.close();
    }
    link(dir + "/c01.h5", "3Dmap", raw + "/c01.h5");
    const H5File linked = H5File::open_read(dir + "/c01.h5");
    CHECK(linked.contiguous_offset("3Dmap", DType::U16) == -1);
    CHECK(linked.unit_offsets("3Dmap", DType::U16, 1).empty());
    CHECK(linked.packed_units("3Dmap", DType::U16, 1).units.empty());
    CHECK(!linked.stored_as("3Dmap", DType::U16));
    CHECK(H5File::open_read(raw + "/c01.h5").stored_as("3Dmap", DType::U16));  // the target itself is mappable

    std::vector<Tensor> want;
    const auto want_ids = [&] {
      LoaderOptions o;
      o.batch_size = 2;
      o.seed = 3;
      o.memory_map = false;
      auto L = open_loader({DataFormat::CosmoFlow, d / "plain", Split::Train}, o);
      return epoch_ids(*L, 0, &want);
    }();
    for (bool map : {true, false})
      for (int io : {1, 3}) {
        INFO("memory_map " << map << " io_threads " << io);
        LoaderOptions o;
        o.batch_size = 2;
        o.seed = 3;
        o.io_threads = io;
        o.memory_map = map;
        auto L = open_loader({DataFormat::CosmoFlow, dir, Split::Train}, o);
        std::vector<Tensor> xs;
        REQUIRE(epoch_ids(*L, 0, &xs) == want_ids);
        for (size_t i = 0; i < xs.size(); ++i) REQUIRE(same(xs[i], want[i]));
      }
  }
  // LBANN's layout: `full` of the second file behind a link.
  const std::string plain = d / "lbann_plain", dir = d / "lbann", raw = d / "lbann_raw";
  for (const std::string& f : {plain, dir, raw}) fs::create_directories(f);
  for (int i = 0; i < 2; ++i) {
    Tensor full = Tensor::empty({4, 4, 4, 4});
    for (int64_t e = 0; e < full.numel(); ++e) full.data<float>()[e] = float((i * 7 + e) % 50);
    Tensor lab = Tensor::full({4}, 0.f);
    lab.data<float>()[0] = float(i);
    const std::string name = "/s" + std::to_string(i) + ".h5";
    write_cosmoflow_lbann_file(plain + name, full, lab);
    if (i == 0) {
      fs::copy_file(plain + name, dir + name);
      continue;
    }
    H5File r = H5File::create(raw + name);
    r.write("pad", Tensor::full({700}, 2.f));
    r.write("full", full);
    r.close();
    H5File l = H5File::create(dir + name);
    l.write("pad", pad);
    l.write("unitPar", lab);
    l.close();
    link(dir + name, "full", raw + name);
  }
  std::vector<Tensor> want;
  for (const auto& [folder, map] : {std::pair<std::string, bool>{plain, false}, {dir, true}, {dir, false}}) {
    INFO("LBANN " << folder << ", memory_map " << map);
    LoaderOptions o;
    o.batch_size = 1;
    o.shuffle = false;
    o.memory_map = map;
    auto L = open_loader({DataFormat::CosmoFlowLbann, folder, Split::Train}, o);
    std::vector<Tensor> xs;
    REQUIRE(epoch_ids(*L, 0, &xs) == std::vector<int64_t>{0, 1});
    if (want.empty()) want = xs;
    for (size_t i = 0; i < 2; ++i) REQUIRE(same(xs[i], want[i]));
  }
}
