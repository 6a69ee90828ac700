#include "support/finite_diff.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "kernels/philox.h"

namespace mrmf::test {

Tensor random_tensor(const Shape& s, uint64_t seed, float lo, float hi) {
  Tensor t = Tensor::empty(s);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = lo + (hi - lo) * kernels::philox_uniform(seed, 99, static_cast<uint64_t>(i));
  return t;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  MRMF_CHECK(a.numel() == b.numel(), "max_abs_diff: ", a.str(), " vs ", b.str());
  Tensor ac = a.to(Device::cpu()).contiguous(), bc = b.to(Device::cpu()).contiguous();
  const float* pa = ac.data<float>();
  const float* pb = bc.data<float>();
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::fabs(double(pa[i]) - double(pb[i])));
  return m;
}

double max_rel_diff(const Tensor& a, const Tensor& b, double floor) {
  Tensor bc = b.to(Device::cpu()).contiguous();
  const float* pb = bc.data<float>();
  double mb = 0;
  for (int64_t i = 0; i < b.numel(); ++i) mb = std::max(mb, std::fabs(double(pb[i])));
  return max_abs_diff(a, b) / (mb + floor);
}

namespace {
double weighted_sum(const Tensor& y, const Tensor& w) {
  Tensor yc = y.to(Device::cpu()).contiguous();
  const float* py = yc.data<float>();
  const float* pw = w.data<float>();
  double s = 0;
  for (int64_t i = 0; i < y.numel(); ++i) s += double(py[i]) * double(pw[i]);
  return s;
}

std::vector<int64_t> pick(int64_t n, int k, uint64_t seed) {
  std::vector<int64_t> idx;
  if (n <= k) {
    for (int64_t i = 0; i < n; ++i) idx.push_back(i);
    return idx;
  }
  for (int i = 0; i < k; ++i)
    idx.push_back(std::min<int64_t>(n - 1, static_cast<int64_t>(kernels::philox_uniform(seed, 5, i) * n)));
  return idx;
}

// Checks dL/dv for entries of `v` (a CPU-visible float tensor we can poke).
// `eval` recomputes L. Returns the normalized max error.
template <class Eval>
double check_entries(Tensor v, const Tensor& analytic, Eval&& eval, const GradCheckOptions& opt, uint64_t seed,
                     const char* what, GradCheckReport& rep) {
  Tensor host = v.to(Device::cpu()).contiguous();
  Tensor ga = analytic.to(Device::cpu()).contiguous();
  const float* pa = ga.data<float>();
  double amax = 0;
  for (int64_t i = 0; i < ga.numel(); ++i) amax = std::max(amax, std::fabs(double(pa[i])));
  double worst = 0;
  float* pv = host.data<float>();
  auto set = [&](int64_t i, float val) {
    pv[i] = val;
    v.copy_from(host);
  };
  const double L0 = eval();
  for (int64_t i : pick(v.numel(), opt.max_checks, seed)) {
    const float orig = pv[i];
    set(i, orig + static_cast<float>(opt.eps));
    const double lp = eval();
    set(i, orig - static_cast<float>(opt.eps));
    const double lm = eval();
    set(i, orig);
    const double fwd = (lp - L0) / opt.eps, bwd = (L0 - lm) / opt.eps;
    if (std::fabs(fwd - bwd) > 0.25 * (std::fabs(fwd) + std::fabs(bwd)) + 1e-3) {
      ++rep.skipped_kinks;  // non-smooth point: the two one-sided slopes disagree
      continue;
    }
    const double fd = (lp - lm) / (2 * opt.eps);
    const double err = std::fabs(fd - double(pa[i])) / (amax + 1e-3);
    ++rep.checked;
    if (err > worst) {
      worst = err;
      std::ostringstream os;
      os << what << "[" << i << "]: finite difference " << fd << " vs analytic " << pa[i];
      rep.worst = os.str();
    }
  }
  return worst;
}
}  // namespace

GradCheckReport check_gradients(Module& m, Context& ctx, const Tensor& x_cpu, const GradCheckOptions& opt) {
  GradCheckReport rep;
  Tensor x = x_cpu.to(ctx.device(), ctx.stream());
  Tensor y = m.forward(ctx, x);
  Tensor w = random_tensor(y.shape(), opt.seed + 1);
  Tensor dx = m.backward(ctx, w.to(ctx.device(), ctx.stream()), true);
  // Snapshot analytic parameter gradients before re-running forward passes.
  ParamStore* store = m.store();
  Tensor gparams = store && store->num_param_elements() > 0 ? store->grads().clone() : Tensor();
  auto eval = [&]() {
    Tensor yy = m.forward(ctx, x);
    m.clear_saved();
    ctx.stream().synchronize();
    return weighted_sum(yy, w);
  };
  if (opt.check_input) rep.input_err = check_entries(x, dx, eval, opt, opt.seed + 2, "input", rep);
  if (opt.check_params && gparams.defined())
    rep.param_err = check_entries(store->values(), gparams, eval, opt, opt.seed + 3, "param", rep);
  return rep;
}

}  // namespace mrmf::test
