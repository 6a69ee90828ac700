// Runs under mpiexec -n 2 and -n 3. Synchronous data parallelism is exact:
// W ranks with local batch B, gradients averaged by GradientSync (small
// buckets, launched from the backward hook as in the trainer), must follow
// the same trajectory as ONE process training on the global batch W*B. The
// reference is computed on every rank by a second copy of the model that never
// communicates. The model is Neuron Inverter-shaped but without batch norm
// (its batch statistics depend on the local batch) and without dropout.
//
// Also: the communication hidden behind backward is measured (in flight >=
// exposed); ranks that disagree on the run configuration stop the Trainer before
// any compute with an error naming the configuration.
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <random>
#include <thread>

#include "core/communicator.h"
#include "fusion/config.h"
#include "fusion/grad_sync.h"
#include "fusion/trainer.h"
#include "kernels/elementwise_ops.h"
#include "layers/context.h"
#include "models/registry.h"
#include "optim/adam.h"

using namespace mrmf;

namespace {
constexpr int64_t kC = 3, kT = 64, kP = 5, kB = 8, kSteps = 6;

std::unique_ptr<Model> small_model() {
  ModelSpec s;
  s.name = "neuron_inverter";
  s.sample_shape = Shape{kC, kT};
  s.options = {{"conv_channels", "4,8,8"}, {"kernel", "3"}, {"pool", "2"}, {"fc", "32,16"},
               {"outputs", std::to_string(kP)}, {"flat_bn", "false"}, {"dropout", "0"}};
  auto m = build_model(s);
  m->build(Device::cpu(), /*seed=*/7, default_init_scheme(s));
  return m;
}

// max |a - b| / max |b| over a flat float buffer.
double rel_diff(const Tensor& a, const Tensor& b) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    num = std::max(num, std::abs(double(a.data<float>()[i]) - double(b.data<float>()[i])));
    den = std::max(den, std::abs(double(b.data<float>()[i])));
  }
  return den > 0 ? num / den : num;
}

// One training step: forward, MSE gradient, backward (with an optional
// gradient sync), Adam update.
void step(Model& m, Context& ctx, Adam& opt, const Tensor& x, const Tensor& y, GradientSync* sync) {
  Tensor p = m.forward(ctx, x);
  Tensor g = Tensor::empty(p.shape());
  kernels::mse_grad(ctx.stream(), p, y, g);
  if (sync) sync->begin_step();
  m.backward(ctx, g);
  if (sync) sync->finish(ctx.stream());
  opt.step(ctx.stream(), 1e-3f);
}
}  // namespace

TEST_CASE("mpi: W ranks x batch B follow one process with batch W*B", "[mpi][data_parallel]") {
  Communicator w = Communicator::world();
  const int64_t W = w.size(), G = W * kB;
  // The same fixed synthetic data set on every rank: smooth inputs whose
  // labels depend on them, so the gradients are not noise.
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Tensor X = Tensor::empty({kSteps * G, kC, kT}), Y = Tensor::empty({kSteps * G, kP});
  for (int64_t n = 0; n < kSteps * G; ++n) {
    float a[kP];
    for (auto& v : a) v = u(rng);
    for (int64_t j = 0; j < kP; ++j) Y.at({n, j}) = a[j];
    for (int64_t c = 0; c < kC; ++c)
      for (int64_t t = 0; t < kT; ++t)
        X.at({n, c, t}) = a[c] * std::sin(0.2f * (1 + c) * t * (1.5f + a[3])) + 0.3f * a[4] + 0.05f * u(rng);
  }

  auto dp = small_model(), ref = small_model();
  Context ctx_dp(Device::cpu()), ctx_ref(Device::cpu());
  Adam opt_dp(dp->params(), AdamOptions{}), opt_ref(ref->params(), AdamOptions{});
  // 1 KiB buckets: several all-reduces per step, most launched during backward.
  GradientSync sync(w, dp->params(), 1024);
  REQUIRE(sync.num_buckets() >= 4);
  Model& m = *dp;
  m.net().set_backward_hook([&](Module& mod) { sync.ready_from(m.first_param_offset(mod), ctx_dp.stream()); });

  for (int64_t s = 0; s < kSteps; ++s) {
    const Tensor xg = X.narrow(0, s * G, G), yg = Y.narrow(0, s * G, G);
    step(*ref, ctx_ref, opt_ref, xg, yg, nullptr);
    const Tensor xl = xg.narrow(0, w.rank() * kB, kB).contiguous(), yl = yg.narrow(0, w.rank() * kB, kB).contiguous();
    step(*dp, ctx_dp, opt_dp, xl, yl, &sync);
    // The communication left exposed after backward: measured, finite, >= 0;
    // no separate communication stream on the CPU.
    CHECK(sync.exposed_comm_seconds() >= 0.0);
    CHECK(sync.exposed_comm_seconds() < 60.0);
    CHECK(sync.comm_stream() == nullptr);
    if (s == 0) {
      CHECK(sync.launched() == static_cast<int>(sync.num_buckets()));
      INFO("gradient relative difference at step 0");
      CHECK(rel_diff(dp->params().grads(), ref->params().grads()) < 1e-5);
    }
  }
  m.net().set_backward_hook(nullptr);
  const double d = rel_diff(dp->params().values(), ref->params().values());
  INFO("weights after " << kSteps << " Adam steps: max |w_dp - w_ref| / max |w_ref| = " << d);
  CHECK(d < 1e-5);
  // The weights moved (the comparison is not trivially between initial states).
  auto init = small_model();
  CHECK(rel_diff(init->params().values(), ref->params().values()) > 1e-4);
  // And every rank holds the same weights.
  Tensor v = dp->params().values().clone();
  Tensor r0 = v.clone();
  w.broadcast(r0, 0, cpu_stream());
  CHECK(rel_diff(v, r0) == 0.0);
}

TEST_CASE("mpi: an all-reduce launched during backward counts as in flight while backward goes on",
          "[mpi][data_parallel]") {
  Communicator w = Communicator::world();
  auto dp = small_model();
  Context ctx(Device::cpu());
  GradientSync sync(w, dp->params(), 1024);
  REQUIRE(sync.num_buckets() >= 4);
  Model& m = *dp;
  // After the first bucket is launched, backward "takes" kSlow longer on
  // every rank (a sleep in the hook): that bucket is in flight all along
  // (no MPI call advances it meanwhile), and none of it is exposed.
  constexpr double kSlow = 0.08;
  bool slept = false;
  m.net().set_backward_hook([&](Module& mod) {
    sync.ready_from(m.first_param_offset(mod), ctx.stream());
    if (sync.launched() > 0 && !slept) {
      slept = true;
      std::this_thread::sleep_for(std::chrono::duration<double>(kSlow));
    }
  });
  Tensor x = Tensor::empty({kB, kC, kT}), y = Tensor::empty({kB, kP});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::sin(0.1f * i + w.rank());
  for (int64_t i = 0; i < y.numel(); ++i) y.data<float>()[i] = std::cos(0.3f * i);
  Adam opt(dp->params(), AdamOptions{});
  CHECK(sync.in_flight_comm_seconds() == 0.0);  // before any finish()
  step(m, ctx, opt, x, y, &sync);
  m.net().set_backward_hook(nullptr);
  REQUIRE(slept);
  const double exposed = sync.exposed_comm_seconds(), flight = sync.in_flight_comm_seconds();
  INFO("exposed " << exposed << " s, in flight " << flight << " s");
  CHECK(flight >= kSlow);
  CHECK(flight >= exposed);
  CHECK(flight < 60.0);
}

TEST_CASE("mpi: ranks with different configurations are refused, naming the keys", "[mpi][trainer]") {
  Communicator w = Communicator::world();
  // The check runs before any data is opened, so the path need not exist.
  const RunConfig cfg = parse_run_config("data: {path: /nonexistent/ni.h5}\nruntime: {device: cpu}\n",
                                         {w.rank() == 1 ? "train.seed=2" : "train.seed=1"});
  TrainerOptions o;
  o.progress = false;
  REQUIRE_THROWS_WITH(Trainer(cfg, w, Device::cpu(), o), Catch::Contains("ranks disagree on the configuration") &&
                                                             Catch::Contains("rank 0 -> rank 1") &&
                                                             Catch::Contains("train.seed: 1 -> 2"));
}
