// A file's chunks located once per process (data/located_chunks.h): later
// loaders over the same files reuse the answer while the file is the same
// and its chunks are where the answer says; a file rewritten in place is
// looked at again -- also one whose identity (inode, size, modification
// time) is kept while its chunks moved.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "data/formats.h"
#include "data/h5file.h"
#include "data/loader.h"
#include "data/located_chunks.h"
#include "support/loader_fixtures.h"

using namespace mrmf;
using namespace mrmf::data;
using namespace mrmf::test::loader;

namespace {

// `3Dmap` of a CosmoFlow file in h5py's kind of chunks: two samples a
// chunk, each sample in 256 of them (gzip 1): 512 chunks, enough to be
// recorded (kRecordedFromChunks).
const WriteOptions kH5pyLike{0, 1, false, {2, 1, 1, 1, 1}};
void write_h5py_like(const std::string& path, const Tensor& x, const Tensor& y) {
  H5File f = H5File::create(path);
  f.write("3Dmap", x, kH5pyLike);
  f.write("unitPar", y);
}

std::vector<Tensor> epoch(const std::string& dir) {
  LoaderOptions o;
  o.batch_size = 2;
  o.seed = 3;
  o.cache_in_memory = false;
  auto L = open_loader({DataFormat::CosmoFlow, dir, Split::Train}, o);
  std::vector<Tensor> xs;
  epoch_ids(*L, 0, &xs);
  return xs;
}

void same_batches(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(same(a[i], b[i]));
}

}  // namespace

TEST_CASE("loader: a file's chunks are located once per process while the file stays the same", "[loader][h5]") {
  Tmp d;
  write_cf(d / "contig", 2, 4, 4);
  fs::create_directories(d / "auto");
  std::vector<Tensor> xs, ys;
  for (const char* name : {"c00.h5", "c01.h5"}) {
    const H5File in = H5File::open_read((d / "contig") + "/" + name);
    xs.push_back(in.read("3Dmap"));
    ys.push_back(in.read("unitPar"));
    write_h5py_like((d / "auto") + "/" + name, xs.back(), ys.back());
  }
  const std::string dir = d / "auto";
  data::detail::forget_located_chunks();
  const int64_t before = data::detail::located_chunks_reused();
  const std::vector<Tensor> want = epoch(d / "contig");
  same_batches(epoch(dir), want);  // located
  CHECK(data::detail::located_chunks_reused() == before);
  same_batches(epoch(dir), want);  // both files' answers reused
  CHECK(data::detail::located_chunks_reused() == before + 2);

  // c01 rewritten in place in other chunks (1024, a sample's 256 each its
  // own): located again, c00 reused.
  {
    H5File f = H5File::create(dir + "/c01.h5");
    f.write("3Dmap", xs[1], WriteOptions{0, 1, false, {1, 1, 1, 1, 1}});
    f.write("unitPar", ys[1]);
  }
  same_batches(epoch(dir), want);
  CHECK(data::detail::located_chunks_reused() == before + 3);
  same_batches(epoch(dir), want);
  CHECK(data::detail::located_chunks_reused() == before + 5);
  // c01 as it was, with another modification time: located again.
  {
    struct stat st {};
    REQUIRE(::stat((dir + "/c01.h5").c_str(), &st) == 0);
    struct timespec times[2] = {st.st_atim, st.st_mtim};
    times[1].tv_sec += 10;
    REQUIRE(::utimensat(AT_FDCWD, (dir + "/c01.h5").c_str(), times, 0) == 0);
  }
  same_batches(epoch(dir), want);
  CHECK(data::detail::located_chunks_reused() == before + 6);

  // The same file, size and modification time, its chunks moved: two
  // datasets of the same shape, data and filters written in the other
  // order, so that `3Dmap`'s chunks lie where the other's were; both files
  // extended to the same size (HDF5 reads a file longer than it wrote),
  // the time set back. The answer on record no longer holds: located again.
  const std::string path = dir + "/c00.h5";
  const auto write_pair = [&](bool map_first) {
    H5File f = H5File::create(path);
    for (const char* name :
         map_first ? std::vector<const char*>{"3Dmap", "other"} : std::vector<const char*>{"other", "3Dmap"})
      f.write(name, xs[0], kH5pyLike);
    f.write("unitPar", ys[0]);
    f.close();
    REQUIRE(::truncate(path.c_str(), 1 << 20) == 0);
  };
  write_pair(true);
  struct stat was {};
  REQUIRE(::stat(path.c_str(), &was) == 0);
  const PackedUnit first = H5File::open_read(path).packed_units("3Dmap", DType::U16, 1).units.at(0);
  same_batches(epoch(dir), want);  // c00 located (rewritten), c01 reused
  CHECK(data::detail::located_chunks_reused() == before + 7);
  write_pair(false);
  const struct timespec times[2] = {was.st_atim, was.st_mtim};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
  struct stat now {};
  REQUIRE(::stat(path.c_str(), &now) == 0);
  REQUIRE((now.st_ino == was.st_ino && now.st_size == was.st_size && now.st_mtim.tv_sec == was.st_mtim.tv_sec &&
           now.st_mtim.tv_nsec == was.st_mtim.tv_nsec));
  REQUIRE(H5File::open_read(path).packed_units("3Dmap", DType::U16, 1).units.at(0).offset != first.offset);
  same_batches(epoch(dir), want);
  CHECK(data::detail::located_chunks_reused() == before + 8);  // c01 only
  same_batches(epoch(dir), want);
  CHECK(data::detail::located_chunks_reused() == before + 10);
  data::detail::forget_located_chunks();
  same_batches(epoch(dir), want);
  CHECK(data::detail::located_chunks_reused() == before + 10);
}
