// Runs under mpiexec -n 2 and -n 3: every rank opens the loaders with its own
// rank; the shards must be disjoint, cover floor(N / world / B) * B * world
// Neuron Inverter samples and floor(N / world) * world CosmoFlow ones, and every rank must run
// the same number of batches (global batch = B x world), none dropping a
// whole batch.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <set>

#include "core/communicator.h"
#include "data/formats.h"
#include "data/loader.h"

using namespace mrmf;
using namespace mrmf::data;
namespace fs = std::filesystem;

namespace {
// A directory name chosen by rank 0 and shared with the others.
std::string shared_dir(const Communicator& w) {
  char buf[256] = {};
  if (w.rank() == 0) {
    const std::string d = (fs::temp_directory_path() / ("mrmf_mpild_" + std::to_string(::getpid()))).string();
    std::strncpy(buf, d.c_str(), sizeof buf - 1);
  }
  MPI_Bcast(buf, sizeof buf, MPI_CHAR, 0, w.native());
  return buf;
}

std::vector<int64_t> all_ids(const Communicator& w, const std::vector<int64_t>& mine) {
  int n = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<size_t>(w.size())), displs(static_cast<size_t>(w.size()), 0);
  MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, w.native());
  for (int r = 1; r < w.size(); ++r) displs[r] = displs[r - 1] + counts[r - 1];
  std::vector<int64_t> out(static_cast<size_t>(displs.back() + counts.back()));
  MPI_Allgatherv(mine.data(), n, MPI_INT64_T, out.data(), counts.data(), displs.data(), MPI_INT64_T, w.native());
  return out;
}

// Ids actually delivered in one epoch (labels[:, 0] hold the global id).
std::vector<int64_t> epoch(Loader& L) {
  L.start_epoch(0);
  std::vector<int64_t> ids;
  LoaderBatch b;
  while (L.next(b))
    for (int64_t j = 0; j < b.y.size(0); ++j) ids.push_back(static_cast<int64_t>(b.y.at({j, 0})));
  return ids;
}
}  // namespace

TEST_CASE("mpi: loader shards are disjoint and cover the data", "[mpi]") {
  Communicator w = Communicator::world();
  const std::string dir = shared_dir(w);
  const int64_t N = 53, B = 4;
  if (w.rank() == 0) {
    fs::create_directories(dir + "/cf");
    NeuronInverterWriter nw(dir + "/ni.h5", DType::F32);
    nw.create_split(Split::Train, N, 8, 3);
    Tensor l = Tensor::full({N, 19}, 0.f);
    for (int64_t i = 0; i < N; ++i) l.data<float>()[i * 19] = static_cast<float>(i);
    nw.write(Split::Train, 0, Tensor::full({N, 8, 3}, 1.f), l);
    nw.close();
    int64_t g = 0;
    for (int f = 0; f < 7; ++f) {  // 7 files of 3 samples
      Tensor lab = Tensor::full({3, 4}, 0.f);
      for (int s = 0; s < 3; ++s) lab.data<float>()[s * 4] = static_cast<float>(g++);
      write_cosmoflow_file(dir + "/cf/c" + std::to_string(f) + ".h5",
                           Tensor::zeros({3, 4, 4, 4, 4}, DType::U16), lab);
    }
  }
  w.barrier();
  LoaderOptions o;
  o.batch_size = B;
  o.rank = w.rank();
  o.world = w.size();
  o.seed = 3;
  {
    auto L = open_loader({DataFormat::NeuronInverter, dir + "/ni.h5", Split::Train}, o);
    const auto ids = all_ids(w, epoch(*L));
    const int64_t per = N / w.size() / B * B;
    REQUIRE(static_cast<int64_t>(ids.size()) == per * w.size());  // global batch = B x world per step
    REQUIRE(std::set<int64_t>(ids.begin(), ids.end()).size() == ids.size());
    REQUIRE(w.allreduce_max(double(L->batches_per_epoch())) == double(L->batches_per_epoch()));
  }
  {
    auto L = open_loader({DataFormat::CosmoFlow, dir + "/cf", Split::Train}, o);
    const auto shard = all_ids(w, L->shard_ids());
    REQUIRE(static_cast<int64_t>(shard.size()) == 21 / w.size() * w.size());  // each sample on one rank at most
    REQUIRE(std::set<int64_t>(shard.begin(), shard.end()).size() == shard.size());
    // Contiguous ranges in file order, equal on every rank: whatever the rank
    // count, nobody drops a whole batch (7 files x 3 on 3 ranks: 7 each, 1 batch + 3).
    const int64_t P = 21 / w.size();
    REQUIRE(static_cast<int64_t>(L->shard_ids().size()) == P);
    for (size_t i = 0; i < L->shard_ids().size(); ++i)
      REQUIRE(L->shard_ids()[i] == w.rank() * P + static_cast<int64_t>(i));
    REQUIRE(P - L->batches_per_epoch() * B < B);
    const auto used = all_ids(w, epoch(*L));
    REQUIRE(std::set<int64_t>(used.begin(), used.end()).size() == used.size());
    REQUIRE(w.allreduce_max(double(L->batches_per_epoch())) == double(L->batches_per_epoch()));
    REQUIRE(static_cast<int64_t>(used.size()) == L->batches_per_epoch() * B * w.size());
  }
  w.barrier();
  if (w.rank() == 0) fs::remove_all(dir);
}
