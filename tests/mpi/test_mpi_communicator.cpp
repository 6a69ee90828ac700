// Runs under mpiexec -n 2 and -n 3: allreduce, broadcast, split and the
// diverging-rank check of the communicator, on CPU tensors.
#include <catch2/catch.hpp>
#include <vector>

#include "core/communicator.h"

using namespace mrmf;

TEST_CASE("mpi: allreduce averages a flat buffer", "[mpi]") {
  Communicator w = Communicator::world();
  Tensor t = Tensor::empty({1000});
  for (int64_t i = 0; i < 1000; ++i) t.data<float>()[i] = static_cast<float>(w.rank() * 1000 + i);
  w.allreduce_avg(t, cpu_stream());
  const double mean_rank = (w.size() - 1) / 2.0;
  for (int64_t i = 0; i < 1000; i += 37) REQUIRE(t.data<float>()[i] == Approx(mean_rank * 1000 + i));
  REQUIRE(w.allreduce_sum(1.0) == w.size());
  REQUIRE(w.allreduce_max(double(w.rank())) == w.size() - 1);
  const std::vector<double> all = w.allgather({double(w.rank()), 10.0 * w.rank()});
  REQUIRE(all.size() == 2 * static_cast<size_t>(w.size()));
  for (int r = 0; r < w.size(); ++r) {
    CHECK(all[2 * r] == r);
    CHECK(all[2 * r + 1] == 10.0 * r);
  }
}

TEST_CASE("mpi: non-blocking sums, polled with test() and finished with wait()", "[mpi]") {
  Communicator w = Communicator::world();
  std::vector<Tensor> ts;
  std::vector<Communicator::Request> rs;
  for (int k = 0; k < 3; ++k) {
    ts.push_back(Tensor::full({4096}, static_cast<float>(w.rank() + k)));
    rs.push_back(w.iallreduce_sum(ts.back(), cpu_stream()));
  }
  // Poll until all are done (every rank polls, so each reduction can progress).
  for (int spins = 0; spins < 1000000; ++spins) {
    bool all = true;
    for (auto& r : rs) all = w.test(r) && all;
    if (all) break;
  }
  for (auto& r : rs) {
    CHECK(w.test(r));  // a finished request stays finished
    w.wait(r);         // and waiting on it is a no-op
  }
  const double ranks = w.size() * (w.size() - 1) / 2.0;
  for (int k = 0; k < 3; ++k) CHECK(ts[k].data<float>()[4095] == Approx(ranks + k * w.size()));
}

TEST_CASE("mpi: broadcast from a non-zero root", "[mpi]") {
  Communicator w = Communicator::world();
  Tensor t = Tensor::full({17}, static_cast<float>(w.rank()));
  const int root = w.size() - 1;
  w.broadcast(t, root, cpu_stream());
  for (int64_t i = 0; i < 17; ++i) REQUIRE(t.data<float>()[i] == static_cast<float>(root));
}

TEST_CASE("mpi: split into groups with their own reductions", "[mpi]") {
  Communicator w = Communicator::world();
  const int color = w.rank() == 0 ? 0 : 1;  // group 0 = {0}, group 1 = the rest
  Communicator g = w.split(color, w.rank());
  REQUIRE(g.size() == (color == 0 ? 1 : w.size() - 1));
  Tensor t = Tensor::full({4}, 1.f);
  g.allreduce_sum(t, cpu_stream());
  REQUIRE(t.data<float>()[0] == static_cast<float>(g.size()));
}

TEST_CASE("mpi: ranks that disagree are caught and named", "[mpi]") {
  Communicator w = Communicator::world();
  REQUIRE_NOTHROW(w.check_same_on_all_ranks(1234, "config hash"));
  const uint64_t v = w.rank() == 1 ? 99 : 1234;
  REQUIRE_THROWS_WITH(w.check_same_on_all_ranks(v, "config hash"),
                      Catch::Contains("ranks disagree on config hash") && Catch::Contains("rank 1"));
}
