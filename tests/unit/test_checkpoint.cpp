// Checkpoints: bit-exact round trips of everything a run needs, rebuilding a
// model from the file alone, atomic replacement, validation errors, and the
// group-only (--init bottom) loads that MRMF fusion uses.
#include <hdf5.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "support/temp_dir.h"
#include <cstring>
#include <filesystem>

#include "data/h5file.h"
#include "fusion/checkpoint.h"
#include "kernels/elementwise_ops.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "support/finite_diff.h"

using namespace mrmf;
namespace fs = std::filesystem;

namespace {
struct TempDir : test::TempDir {
  TempDir() : test::TempDir("mrmf_ckpt") {}
};

ModelSpec ni_spec(int64_t T) { return ModelSpec{"neuron_inverter", "", Shape{3, T}, {{"fc", "64,32"}}}; }

std::unique_ptr<Model> make(const ModelSpec& s, uint64_t seed) {
  auto m = build_model(s);
  m->build(Device::cpu(), seed, default_init_scheme(s));
  return m;
}

// A few Adam steps, so that weights, BN statistics, moments and step counts are all non-trivial.
void train(Model& m, Optimizer& opt, int steps) {
  Context ctx(Device::cpu());
  for (int i = 0; i < steps; ++i) {
    ctx.set_step(static_cast<uint64_t>(i));
    std::vector<int64_t> d{4};
    for (int k = 0; k < m.sample_shape().ndim(); ++k) d.push_back(m.sample_shape()[k]);
    Tensor x = test::random_tensor(Shape(d), 50 + static_cast<uint64_t>(i));
    Tensor y = m.forward(ctx, x);
    Tensor t = test::random_tensor(y.shape(), 90 + static_cast<uint64_t>(i));
    Tensor g = Tensor::empty(y.shape());
    kernels::mse_grad(ctx.stream(), y, t, g);
    m.backward(ctx, g);
    opt.step(ctx.stream(), 1e-3f);
  }
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

ErrorKind kind_of(const std::function<void()>& f, std::string* msg = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (msg) *msg = e.what();
    return e.kind();
  }
  FAIL("expected an mrmf::Error");
  return ErrorKind::Runtime;
}

LrSchedulePtr make_schedule() {
  PlateauOptions po;
  po.factor = 0.11;
  po.patience = 1;
  po.cooldown = 2;
  return std::make_unique<LinearWarmup>(5, ScheduleUnit::Epoch, std::make_unique<ReduceLROnPlateau>(1e-3, po));
}
}  // namespace

TEST_CASE("checkpoint: bit-exact round trip and rebuild from the file alone", "[checkpoint]") {
  TempDir tmp;
  const ModelSpec spec = ni_spec(400);
  auto model = make(spec, 3);
  Adam opt(model->params());
  train(*model, opt, 3);
  opt.freeze(ParamGroup::Bottom);
  auto sched = make_schedule();
  for (double v : {1.0, 0.5, 0.7, 0.9, 0.8}) sched->on_epoch_end(v);

  TrainingState ts;
  ts.epoch = 5;
  ts.step = 123;
  ts.state["rng.seed"] = static_cast<int64_t>(0xDEADBEEFCAFEF00Dull);
  ts.state["loader.offset"] = int64_t{4096};
  ts.state["val.best"] = 0.1234567890123;
  ts.config = "model:\n  name: neuron_inverter\ntrain:\n  epochs: 161\n";
  const std::string path = tmp.file("ni.h5");
  save_checkpoint(path, spec, *model, &opt, sched.get(), ts);
  REQUIRE(tmp.count() == 1);  // no temporary left behind

  // The model alone, from the file alone.
  LoadedModel lm = load_model_from_checkpoint(path, Device::cpu());
  REQUIRE(lm.model->name() == "neuron_inverter");
  REQUIRE(lm.model->sample_shape() == Shape{3, 400});
  REQUIRE(lm.header.spec.variant == "default");
  REQUIRE(lm.header.spec.options == spec.options);
  REQUIRE(same_bytes(lm.model->params().values(), model->params().values()));
  REQUIRE(same_bytes(lm.model->params().buffers(), model->params().buffers()));
  REQUIRE(lm.model->params().value(lm.model->params().at("flat_bn.num_batches_tracked")).data<float>()[0] == 3.f);

  // Training state.
  const TrainingState& t2 = lm.header.training;
  REQUIRE(t2.epoch == 5);
  REQUIRE(t2.step == 123);
  REQUIRE(t2.config == ts.config);
  REQUIRE(t2.state == ts.state);  // values and their int/real kinds
  REQUIRE(std::get<int64_t>(t2.state.at("rng.seed")) == static_cast<int64_t>(0xDEADBEEFCAFEF00Dull));
  REQUIRE(lm.header.has_optimizer);
  REQUIRE(lm.header.optimizer_type == "Adam");

  // Optimizer state, step counts and frozen flags.
  Adam opt2(lm.model->params());
  load_optimizer_state(path, opt2);
  for (const auto& [name, t] : opt.state_tensors()) REQUIRE(same_bytes(opt2.state(name), t));
  REQUIRE(opt2.step_count(ParamGroup::Bottom) == 3);
  REQUIRE(opt2.step_count(ParamGroup::Top) == 3);
  REQUIRE(opt2.frozen(ParamGroup::Bottom));
  REQUIRE(!opt2.frozen(ParamGroup::Top));

  // Scheduler state.
  auto sched2 = make_schedule();
  load_scheduler_state(path, *sched2);
  REQUIRE(sched2->state() == sched->state());
  REQUIRE(sched2->lr(7, 0) == sched->lr(7, 0));

  // PyTorch layout: num_batches_tracked is a 0-dim int64, weights float32 [out, in, k].
  const auto f = data::H5File::open_read(path);
  REQUIRE(f.dtype("model/flat_bn.num_batches_tracked") == DType::I64);
  REQUIRE(f.shape("model/flat_bn.num_batches_tracked").empty());
  REQUIRE(f.shape("model/cnn_block.0.weight") == std::vector<int64_t>{30, 3, 4});
  REQUIRE(f.read_string_attribute("model/cnn_block.0.weight", "group") == std::optional<std::string>("bottom"));
  REQUIRE(f.shape("optimizer/exp_avg/fc_block.0.weight") == std::vector<int64_t>{64, 900});
}

TEST_CASE("checkpoint: a failed save leaves the previous checkpoint intact", "[checkpoint]") {
  TempDir tmp;
  const ModelSpec spec = ni_spec(400);
  auto model = make(spec, 3);
  const std::string path = tmp.file("ckpt.h5");
  save_checkpoint(path, spec, *model, nullptr, nullptr, TrainingState{});
  const Tensor before = model->params().values().clone();

  auto other = make(spec, 4);  // different values
  SaveOptions so;
  int items = 0;
  so.after_item = [&](const std::string&) {
    if (++items == 4) throw std::runtime_error("simulated disk failure");
  };
  REQUIRE_THROWS_WITH(save_checkpoint(path, spec, *other, nullptr, nullptr, TrainingState{}, so),
                      Catch::Contains("simulated disk failure"));
  REQUIRE(tmp.count() == 1);  // the temporary is gone, the old file is there
  LoadedModel lm = load_model_from_checkpoint(path, Device::cpu());
  REQUIRE(same_bytes(lm.model->params().values(), before));

  // A successful save replaces it.
  save_checkpoint(path, spec, *other, nullptr, nullptr, TrainingState{});
  LoadedModel lm2 = load_model_from_checkpoint(path, Device::cpu());
  REQUIRE(same_bytes(lm2.model->params().values(), other->params().values()));
  REQUIRE(tmp.count() == 1);
}

TEST_CASE("checkpoint: mismatches are clear errors", "[checkpoint]") {
  TempDir tmp;
  const ModelSpec spec = ni_spec(400);
  auto model = make(spec, 3);
  Adam adam(model->params());
  const std::string path = tmp.file("ni.h5");
  save_checkpoint(path, spec, *model, &adam, nullptr, TrainingState{});
  std::string msg;

  // Another resolution, full load: the input shape is checked first ...
  auto dense = make(ni_spec(800), 1);
  REQUIRE(kind_of([&] { load_params(path, *dense); }, &msg) == ErrorKind::Data);
  REQUIRE_THAT(msg, Catch::Contains("input shape") && Catch::Contains(path));
  // ... and without that check, the parameter shapes: named, with the file and both shapes.
  ParamLoadOptions lo;
  lo.check_input_shape = false;
  const Tensor untouched = dense->params().values().clone();
  REQUIRE(kind_of([&] { load_params(path, *dense, lo); }, &msg) == ErrorKind::Shape);
  REQUIRE_THAT(msg, Catch::Contains("'fc_block.0.weight'") && Catch::Contains("(64, 900)") &&
                        Catch::Contains("(64, 1980)") && Catch::Contains(path) &&
                        Catch::Contains("'flat_bn.running_mean'"));
  REQUIRE(same_bytes(dense->params().values(), untouched));  // nothing copied

  // Another model / variant.
  const ModelSpec cspec{"cosmoflow", "", Shape{4, 16, 16, 16}, {}};
  auto cosmo = make(cspec, 1);
  REQUIRE(kind_of([&] { load_params(path, *cosmo); }, &msg) == ErrorKind::Data);
  REQUIRE_THAT(msg, Catch::Contains("neuron_inverter") && Catch::Contains("cosmoflow"));
  const std::string cpath = tmp.file("cosmo.h5");
  save_checkpoint(cpath, cspec, *cosmo, nullptr, nullptr, TrainingState{});
  ParamLoadOptions vo;
  vo.expect_variant = "lbann2019";
  REQUIRE(kind_of([&] { load_params(cpath, *cosmo, vo); }, &msg) == ErrorKind::Data);
  REQUIRE_THAT(msg, Catch::Contains("'mrmf'") && Catch::Contains("lbann2019"));

  // Optimizer type.
  SGD sgd(model->params(), SgdOptions{0.9f});
  REQUIRE(kind_of([&] { load_optimizer_state(path, sgd); }, &msg) == ErrorKind::Data);
  REQUIRE_THAT(msg, Catch::Contains("Adam") && Catch::Contains("SGD"));
  // No scheduler saved.
  auto sched = make_schedule();
  REQUIRE(kind_of([&] { load_scheduler_state(path, *sched); }, &msg) == ErrorKind::Data);

  // A missing parameter (dataset deleted behind our back).
  {
    const hid_t fid = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    REQUIRE(fid >= 0);
    REQUIRE(H5Ldelete(fid, "model/cnn_block.3.bias", H5P_DEFAULT) >= 0);
    H5Fclose(fid);
  }
  auto same = make(spec, 9);
  REQUIRE(kind_of([&] { load_params(path, *same); }, &msg) == ErrorKind::Data);
  REQUIRE_THAT(msg, Catch::Contains("'cnn_block.3.bias'") && Catch::Contains("missing") && Catch::Contains(path));
  // Loading only the top group does not need it.
  ParamLoadOptions top;
  top.groups = {ParamGroup::Top};
  REQUIRE(load_params(path, *same, top).loaded.size() == same->params().names_in_group(ParamGroup::Top).size());

  // Not a checkpoint at all.
  const std::string junk = tmp.file("junk.h5");
  {
    auto f = data::H5File::create(junk);
    f.write("x", Tensor::full({3}, 1.f));
  }
  REQUIRE(kind_of([&] { read_checkpoint_header(junk); }, &msg) == ErrorKind::Data);
  REQUIRE_THAT(msg, Catch::Contains("not an mrmf checkpoint") &&
                        Catch::Contains("another kind of HDF5 file, or a damaged checkpoint"));
}

TEST_CASE("checkpoint: group-only load initialises the dense bottom from a coarse run", "[checkpoint]") {
  TempDir tmp;
  const ModelSpec coarse_spec = ni_spec(400), dense_spec = ni_spec(800);
  auto coarse = make(coarse_spec, 1);
  Adam opt(coarse->params());
  train(*coarse, opt, 2);
  const std::string path = tmp.file("coarse.h5");
  save_checkpoint(path, coarse_spec, *coarse, &opt, nullptr, TrainingState{});

  auto dense = make(dense_spec, 2);
  ParamStore& d = dense->params();
  std::map<std::string, Tensor> top_before;
  for (const auto& n : d.names_in_group(ParamGroup::Top)) top_before[n] = d.value(d.at(n)).clone();

  ParamLoadOptions o;
  o.groups = {ParamGroup::Bottom};
  o.freeze_loaded = true;
  const ParamLoadReport r = load_params(path, *dense, o);
  REQUIRE(r.loaded == d.names_in_group(ParamGroup::Bottom));
  REQUIRE(r.freeze == std::vector<ParamGroup>{ParamGroup::Bottom});
  for (const auto& n : d.names_in_group(ParamGroup::Bottom))
    REQUIRE(same_bytes(d.value(d.at(n)), coarse->params().value(coarse->params().at(n))));
  for (const auto& [n, t] : top_before) REQUIRE(same_bytes(d.value(d.at(n)), t));

  // The top group cannot come from another resolution: named error, nothing copied.
  o.groups = {ParamGroup::Top};
  std::string msg;
  REQUIRE(kind_of([&] { load_params(path, *dense, o); }, &msg) == ErrorKind::Shape);
  REQUIRE_THAT(msg, Catch::Contains("'fc_block.0.weight'"));
  for (const auto& [n, t] : top_before) REQUIRE(same_bytes(d.value(d.at(n)), t));
}

TEST_CASE("checkpoint: cosmoflow with SGD round trip", "[checkpoint]") {
  TempDir tmp;
  const ModelSpec spec{"cosmoflow", "mlperf", Shape{4, 16, 16, 16}, {{"dropout", "0.25"}}};
  auto model = make(spec, 5);
  SgdOptions so;
  so.momentum = 0.9f;
  SGD opt(model->params(), so);
  train(*model, opt, 1);
  const std::string path = tmp.file("cf.h5");
  save_checkpoint(path, spec, *model, &opt, nullptr, TrainingState{1, 1, {}, "", {}});
  LoadedModel lm = load_model_from_checkpoint(path, Device::cpu());
  REQUIRE(lm.header.spec.variant == "mlperf");
  REQUIRE(lm.header.spec.options.at("dropout") == "0.25");
  REQUIRE(same_bytes(lm.model->params().values(), model->params().values()));
  SGD opt2(lm.model->params(), so);
  load_optimizer_state(path, opt2);
  REQUIRE(same_bytes(opt2.state("momentum_buffer"), opt.state("momentum_buffer")));
  REQUIRE(opt2.step_count(ParamGroup::Top) == 1);
}
