#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "optim/adam.h"
#include "optim/sgd.h"

using namespace mrmf;

namespace {
// A tiny store: bottom "a.weight" [3], top "b.weight" [2, 2] and "b.bias" [1],
// with alignment padding after each.
struct TinyStore {
  ParamStore s;
  TinyStore() {
    s.add_param("a.weight", {3}, ParamGroup::Bottom);
    s.add_param("b.weight", {2, 2}, ParamGroup::Top);
    s.add_param("b.bias", {1}, ParamGroup::Top);
    s.finalize(Device::cpu());
    set_values({0.5f, -1.f, 2.f, 1.f, -0.25f, 0.75f, -2.f, 0.1f});
  }
  // The 8 real elements in registration order.
  std::vector<int64_t> flat_index() const {
    std::vector<int64_t> idx;
    for (const auto& p : s.entries())
      for (int64_t i = 0; i < p.numel(); ++i) idx.push_back(p.offset + i);
    return idx;
  }
  void set(const Tensor& flat, const std::vector<float>& v) {
    const auto idx = flat_index();
    for (size_t k = 0; k < idx.size(); ++k) flat.data<float>()[idx[k]] = v[k];
  }
  std::vector<float> get(const Tensor& flat) const {
    std::vector<float> out;
    for (int64_t i : flat_index()) out.push_back(flat.data<float>()[i]);
    return out;
  }
  void set_values(const std::vector<float>& v) { set(s.values(), v); }
  void set_grads(const std::vector<float>& v) { set(s.grads(), v); }
  std::vector<float> values() const { return get(s.values()); }
};

// The gradient of step t (1-based) for element k: varies in sign and size.
float grad_at(int t, size_t k) { return std::sin(0.7f * float(t) + 1.3f * float(k)) * (1.f + 0.5f * float(k)); }

void require_close(const std::vector<float>& got, const std::vector<double>& want, double tol = 1e-5) {
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    INFO("element " << k << ": got " << got[k] << ", want " << want[k]);
    REQUIRE(std::fabs(double(got[k]) - want[k]) <= tol * (1.0 + std::fabs(want[k])));
  }
}

bool padding_is_zero(const TinyStore& t) {
  const auto real = t.flat_index();
  for (int64_t i = 0; i < t.s.num_param_elements(); ++i) {
    if (std::find(real.begin(), real.end(), i) != real.end()) continue;
    if (t.s.values().data<float>()[i] != 0.f) return false;
  }
  return true;
}

// Independent scalar SGD (torch semantics), in double.
std::vector<double> sgd_reference(std::vector<double> p, int steps, double lr, SgdOptions o) {
  std::vector<double> buf(p.size(), 0.0);
  for (int t = 1; t <= steps; ++t)
    for (size_t k = 0; k < p.size(); ++k) {
      double d = grad_at(t, k) + o.weight_decay * p[k];
      if (o.momentum != 0) {
        buf[k] = t == 1 ? d : o.momentum * buf[k] + (1 - o.dampening) * d;
        d = o.nesterov ? d + o.momentum * buf[k] : buf[k];
      }
      p[k] -= lr * d;
    }
  return p;
}

// Independent scalar Adam / AdamW (torch semantics), in double.
std::vector<double> adam_reference(std::vector<double> p, int steps, double lr, AdamOptions o) {
  std::vector<double> m(p.size(), 0.0), v(p.size(), 0.0);
  for (int t = 1; t <= steps; ++t)
    for (size_t k = 0; k < p.size(); ++k) {
      double g = grad_at(t, k);
      if (o.decoupled)
        p[k] *= 1 - lr * o.weight_decay;
      else
        g += o.weight_decay * p[k];
      m[k] = o.beta1 * m[k] + (1 - o.beta1) * g;
      v[k] = o.beta2 * v[k] + (1 - o.beta2) * g * g;
      const double mhat = m[k] / (1 - std::pow(double(o.beta1), t));
      const double vhat = v[k] / (1 - std::pow(double(o.beta2), t));
      p[k] -= lr * mhat / (std::sqrt(vhat) + o.eps);
    }
  return p;
}

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

void run_steps(TinyStore& t, Optimizer& opt, int steps, float lr) {
  for (int s = 1; s <= steps; ++s) {
    std::vector<float> g;
    for (size_t k = 0; k < 8; ++k) g.push_back(grad_at(s, k));
    t.set_grads(g);
    opt.step(cpu_stream(), lr);
  }
}
}  // namespace

TEST_CASE("optim: SGD by hand (momentum 0.9, lr 0.1)", "[optim][SGD]") {
  TinyStore t;
  SgdOptions o;
  o.momentum = 0.9f;
  SGD sgd(t.s, o);
  t.set_grads(std::vector<float>(8, 0.5f));
  sgd.step(cpu_stream(), 0.1f);  // buf = 0.5, p -= 0.05
  REQUIRE(t.values()[0] == Approx(0.45f));
  sgd.step(cpu_stream(), 0.1f);  // buf = 0.9 * 0.5 + 0.5 = 0.95, p -= 0.095
  REQUIRE(t.values()[0] == Approx(0.355f));
  REQUIRE(sgd.state_of("momentum_buffer", t.s.at("a.weight")).data<float>()[0] == Approx(0.95f));
  REQUIRE(sgd.step_count(ParamGroup::Bottom) == 2);
}

TEST_CASE("optim: SGD variants match torch's formulas", "[optim][SGD]") {
  struct Case {
    const char* name;
    SgdOptions o;
  };
  std::vector<Case> cases(5);
  cases[0] = {"plain", {}};
  cases[1] = {"momentum", {0.9f, 0.f, 0.f, false}};
  cases[2] = {"momentum+dampening", {0.8f, 0.3f, 0.f, false}};
  cases[3] = {"nesterov", {0.9f, 0.f, 0.f, true}};
  cases[4] = {"nesterov+weight decay", {0.9f, 0.f, 5e-2f, true}};
  for (const auto& c : cases) {
    INFO(c.name);
    TinyStore t;
    const auto p0 = to_double(t.values());
    SGD sgd(t.s, c.o);
    run_steps(t, sgd, 5, 0.05f);
    require_close(t.values(), sgd_reference(p0, 5, 0.05, c.o));
    REQUIRE(padding_is_zero(t));
  }
  TinyStore t;
  REQUIRE_THROWS_WITH(SGD(t.s, SgdOptions{0.f, 0.f, 0.f, true}), Catch::Contains("Nesterov"));
  REQUIRE(SGD(t.s).state_tensors().empty());  // no momentum, no buffer (as torch)
}

TEST_CASE("optim: Adam and AdamW by hand", "[optim][Adam]") {
  // With a constant gradient g the bias-corrected moments are g and g^2, so
  // each step moves p by lr * g / (|g| + eps) ~= lr.
  TinyStore t;
  Adam adam(t.s);
  t.set_grads(std::vector<float>(8, 0.5f));
  adam.step(cpu_stream(), 0.1f);
  REQUIRE(t.values()[0] == Approx(0.4f).epsilon(1e-6));   // 0.5 - 0.1
  REQUIRE(t.values()[3] == Approx(0.9f).epsilon(1e-6));   // 1.0 - 0.1
  REQUIRE(adam.state_of("exp_avg", t.s.at("a.weight")).data<float>()[0] == Approx(0.05f));
  REQUIRE(adam.state_of("exp_avg_sq", t.s.at("a.weight")).data<float>()[0] == Approx(0.00025f).epsilon(1e-4));
  adam.step(cpu_stream(), 0.1f);  // m = 0.095, v = 0.00049975; m/0.19 = 0.5, v/0.001999 = 0.25
  REQUIRE(t.values()[0] == Approx(0.3f).epsilon(1e-5));

  TinyStore w;
  AdamW adamw(w.s);  // torch default weight_decay 0.01
  REQUIRE(adamw.type() == "AdamW");
  w.set_grads(std::vector<float>(8, 0.5f));
  adamw.step(cpu_stream(), 0.1f);                          // p = 1 * (1 - 0.001) - 0.1
  REQUIRE(w.values()[3] == Approx(0.899f).epsilon(1e-6));
}

TEST_CASE("optim: Adam and AdamW match torch's formulas over several steps", "[optim][Adam]") {
  for (int variant = 0; variant < 4; ++variant) {
    AdamOptions o;
    o.beta1 = variant == 3 ? 0.5f : 0.9f;
    o.beta2 = variant == 3 ? 0.9f : 0.999f;
    o.weight_decay = variant == 0 ? 0.f : 0.1f;
    o.decoupled = variant == 2;
    INFO("variant " << variant);
    TinyStore t;
    const auto p0 = to_double(t.values());
    Adam adam(t.s, o);
    run_steps(t, adam, 6, 1e-2f);
    require_close(t.values(), adam_reference(p0, 6, 1e-2, o));
    REQUIRE(padding_is_zero(t));
  }
}

TEST_CASE("optim: frozen groups are neither updated nor decayed", "[optim][Adam][SGD]") {
  TinyStore t;
  const auto p0 = t.values();
  AdamOptions o;
  o.weight_decay = 0.1f;
  o.decoupled = true;
  AdamW adam(t.s, o);
  adam.freeze(ParamGroup::Bottom);
  REQUIRE(adam.frozen(ParamGroup::Bottom));
  run_steps(t, adam, 3, 1e-2f);
  const auto p = t.values();
  for (size_t k = 0; k < 3; ++k) REQUIRE(p[k] == p0[k]);  // bottom untouched
  for (size_t k = 3; k < 8; ++k) REQUIRE(p[k] != p0[k]);
  REQUIRE(adam.step_count(ParamGroup::Bottom) == 0);
  REQUIRE(adam.step_count(ParamGroup::Top) == 3);
  REQUIRE(adam.state_of("exp_avg", t.s.at("a.weight")).data<float>()[0] == 0.f);

  // Unfrozen, the bottom starts at its own step 1 (bias correction from scratch),
  // while the top continues at step 4: two launches, each with its own step.
  adam.unfreeze(ParamGroup::Bottom);
  run_steps(t, adam, 1, 1e-2f);
  REQUIRE(adam.step_count(ParamGroup::Bottom) == 1);
  REQUIRE(adam.step_count(ParamGroup::Top) == 4);
  // A fresh AdamW on the bottom alone, one step with the step-1 gradient, gives the same bottom values.
  TinyStore r;
  AdamW ref(r.s, o);
  r.set_values(p);
  ref.freeze(ParamGroup::Top);
  run_steps(r, ref, 1, 1e-2f);
  for (size_t k = 0; k < 3; ++k) REQUIRE(t.values()[k] == r.values()[k]);
}

TEST_CASE("optim: reset_group and copy_group_state_from", "[optim][Adam]") {
  TinyStore a, b;
  Adam oa(a.s), ob(b.s);
  run_steps(a, oa, 3, 1e-2f);
  const ParamId top_w = a.s.at("b.weight");
  const float m_top = oa.state_of("exp_avg", top_w).data<float>()[1];
  REQUIRE(m_top != 0.f);

  ob.copy_group_state_from(oa, ParamGroup::Top);
  REQUIRE(ob.step_count(ParamGroup::Top) == 3);
  REQUIRE(ob.step_count(ParamGroup::Bottom) == 0);
  REQUIRE(ob.state_of("exp_avg", b.s.at("b.weight")).data<float>()[1] == m_top);
  REQUIRE(ob.state_of("exp_avg_sq", b.s.at("b.bias")).data<float>()[0] ==
          oa.state_of("exp_avg_sq", a.s.at("b.bias")).data<float>()[0]);
  REQUIRE(ob.state_of("exp_avg", b.s.at("a.weight")).data<float>()[0] == 0.f);

  oa.reset_group(ParamGroup::Bottom);
  REQUIRE(oa.step_count(ParamGroup::Bottom) == 0);
  REQUIRE(oa.step_count(ParamGroup::Top) == 3);
  for (int64_t i = 0; i < 3; ++i) REQUIRE(oa.state_of("exp_avg_sq", a.s.at("a.weight")).data<float>()[i] == 0.f);
  REQUIRE(oa.state_of("exp_avg", top_w).data<float>()[1] == m_top);

  oa.zero_state();
  REQUIRE(oa.step_count(ParamGroup::Top) == 0);
  REQUIRE(oa.state("exp_avg").data<float>()[a.s.info(top_w).offset + 1] == 0.f);
  REQUIRE(oa.state_tensors().size() == 2);
  REQUIRE(oa.state_tensors()[0].first == "exp_avg");
  REQUIRE(oa.state_tensors()[1].first == "exp_avg_sq");
  REQUIRE_THROWS_WITH(oa.state("momentum_buffer"), Catch::Contains("exp_avg, exp_avg_sq"));
}

TEST_CASE("optim: group state copy refuses different layouts", "[optim][Adam]") {
  TinyStore a;
  ParamStore other;
  other.add_param("a.weight", {3}, ParamGroup::Bottom);
  other.add_param("b.weight", {2, 3}, ParamGroup::Top);  // e.g. a different input resolution
  other.add_param("b.bias", {1}, ParamGroup::Top);
  other.finalize(Device::cpu());
  Adam oa(a.s), oo(other);
  run_steps(a, oa, 1, 1e-2f);
  REQUIRE_NOTHROW(oo.copy_group_state_from(oa, ParamGroup::Bottom));  // the bottoms agree
  try {
    oo.copy_group_state_from(oa, ParamGroup::Top);
    FAIL("no exception");
  } catch (const Error& e) {
    REQUIRE(e.kind() == ErrorKind::Shape);
    REQUIRE_THAT(e.what(), Catch::Contains("group 'top'") && Catch::Contains("'b.weight': source [2, 2] vs destination [2, 3]"));
  }
  REQUIRE(oo.step_count(ParamGroup::Top) == 0);  // nothing copied
  SgdOptions so;
  so.momentum = 0.9f;
  SGD sgd(a.s, so);
  REQUIRE_THROWS_WITH(sgd.copy_group_state_from(oa, ParamGroup::Bottom), Catch::Contains("optimizer type Adam"));
}

TEST_CASE("optim: parameters registered out of group order", "[optim][SGD]") {
  // top, bottom, top: the top group is two runs; only the bottom is frozen.
  ParamStore s;
  s.add_param("t1", {2}, ParamGroup::Top);
  s.add_param("b1", {2}, ParamGroup::Bottom);
  s.add_param("t2", {2}, ParamGroup::Top);
  s.finalize(Device::cpu());
  for (const char* n : {"t1", "b1", "t2"}) {
    s.value(s.at(n)).fill_(1.f);
    s.grad(s.at(n)).fill_(1.f);
  }
  SGD sgd(s);
  sgd.freeze(ParamGroup::Bottom);
  sgd.step(cpu_stream(), 0.5f);
  REQUIRE(s.value(s.at("t1")).data<float>()[1] == 0.5f);
  REQUIRE(s.value(s.at("b1")).data<float>()[0] == 1.f);
  REQUIRE(s.value(s.at("t2")).data<float>()[0] == 0.5f);
}
