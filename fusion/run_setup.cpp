// The pieces a training run is assembled from, apart from the Trainer's
// loop: an epoch record's metrics.jsonl line, and the factories that turn a
// RunConfig into loader options, a schedule, an optimizer, a model spec and
// data specs (shared by the trainer, the orchestrator and the commands).
#include <cstdlib>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "core/log.h"
#include "fusion/trainer.h"
#include "optim/adam.h"
#include "optim/sgd.h"

namespace mrmf {

std::string EpochRecord::to_json() const {
  nlohmann::json j{{"epoch", epoch},         {"train_loss", train_loss}, {"val_loss", val_loss},
                   {"lr", lr},               {"io_s", io_s},             {"compute_s", compute_s},
                   {"comm_s", comm_s},       {"comm_in_flight_s", comm_in_flight_s},
                   {"val_s", val_s},         {"epoch_s", epoch_s},
                   {"samples_per_s", samples_per_s}, {"steps", steps},  {"samples", samples}};
  if (resumed_at_step > 0) j["resumed_at_step"] = resumed_at_step;
  if (earlier_s > 0) j["earlier_s"] = earlier_s;
  if (cut_short) j["cut_short"] = true;
  if (!tag.empty()) j["tag"] = tag;
  return j.dump();
}

EpochRecord EpochRecord::from_json(const nlohmann::json& j) {
  auto number = [&](const char* k) {  // NaN and Inf are written as null
    const auto& v = j.at(k);
    return v.is_null() ? std::numeric_limits<double>::quiet_NaN() : v.get<double>();
  };
  EpochRecord r;
  r.epoch = j.at("epoch");
  r.train_loss = number("train_loss");
  r.val_loss = number("val_loss");
  r.lr = number("lr");
  r.io_s = number("io_s");
  r.compute_s = number("compute_s");
  r.comm_s = number("comm_s");
  r.comm_in_flight_s = j.value("comm_in_flight_s", 0.0);
  r.val_s = number("val_s");
  r.epoch_s = number("epoch_s");
  r.samples_per_s = number("samples_per_s");
  r.steps = j.at("steps");
  r.samples = j.at("samples");
  r.resumed_at_step = j.value("resumed_at_step", int64_t{0});
  r.cut_short = j.value("cut_short", false);
  r.earlier_s = j.value("earlier_s", 0.0);
  r.tag = j.value("tag", "");
  return r;
}

// ------------------------------------------------------------------ factories
data::LoaderOptions loader_options(const RunConfig& cfg, const Communicator& comm, Device device, bool training) {
  data::LoaderOptions o;
  o.batch_size = training || cfg.train.val_batch_size == 0 ? cfg.train.batch_size : cfg.train.val_batch_size;
  o.shuffle = training;
  if (training) o.max_samples = cfg.data.max_train_samples;
  o.seed = cfg.train.seed;
  o.rank = comm.rank();
  o.world = comm.size();
  o.device = device;
  o.reduce = cfg.data.reduce;
  o.ni_layout = cfg.data.layout == "reinterpret" ? data::NiLayout::Reinterpret : data::NiLayout::Transpose;
  o.cache_in_memory = cfg.data.cache;
  o.memory_map = cfg.data.memory_map;
  o.reduce_on = data::parse_reduce_on(cfg.data.reduce_on);
  o.prefetch_depth = static_cast<int>(cfg.data.prefetch);
  o.io_threads = static_cast<int>(cfg.data.io_threads);
  // Experimental, not yet a config key (data/loader.h): batches copied to the
  // GPU by the I/O thread, overlapping the steps before them.
  if (const char* v = std::getenv("MRMF_OVERLAP_H2D"); v && std::string(v) == "1" && device.is_cuda()) {
    o.overlap_h2d = true;
    static std::once_flag noted;
    std::call_once(noted, [] { log::info("MRMF_OVERLAP_H2D=1: batches go to the GPU from the I/O thread (experimental)"); });
  }
  if (cfg.data.transform == "log1p") o.transform.kind = kernels::FusedTransform::Log1p;
  if (cfg.data.transform == "scale") {
    o.transform.kind = kernels::FusedTransform::Scale;
    for (double s : cfg.data.scale) {
      o.transform.scale.push_back(static_cast<float>(s));
      o.transform.shift.push_back(0.f);
    }
  }
  return o;
}

std::unique_ptr<LrSchedule> make_schedule(const RunConfig& cfg) {
  const auto& s = cfg.schedule;
  const double lr = cfg.optimizer.lr;
  LrSchedulePtr base;
  if (s.type == "constant") {
    base = std::make_unique<ConstantLr>(lr);
  } else if (s.type == "plateau") {
    PlateauOptions p;
    p.factor = s.plateau_factor;
    p.patience = s.plateau_patience;
    p.cooldown = s.plateau_cooldown;
    p.min_lr = s.plateau_min_lr;
    base = std::make_unique<ReduceLROnPlateau>(lr, p);
  } else if (s.type == "piecewise") {
    base = std::make_unique<PiecewiseConstant>(s.boundaries, s.values, ScheduleUnit::Step);
  } else if (s.type == "cosine") {
    base = std::make_unique<CosineDecay>(lr, s.decay_steps, s.end_lr / lr, ScheduleUnit::Step);
  } else {
    base = std::make_unique<PolynomialDecay>(lr, s.end_lr, s.decay_steps, s.power, ScheduleUnit::Step);
  }
  if (s.warmup_epochs > 0) return std::make_unique<LinearWarmup>(s.warmup_epochs, ScheduleUnit::Epoch, std::move(base));
  if (s.warmup_steps > 0) return std::make_unique<LinearWarmup>(s.warmup_steps, ScheduleUnit::Step, std::move(base));
  return base;
}

std::unique_ptr<Optimizer> make_optimizer(const RunConfig& cfg, ParamStore& store) {
  const auto& o = cfg.optimizer;
  if (o.name == "sgd") {
    SgdOptions so;
    so.momentum = static_cast<float>(o.momentum);
    so.weight_decay = static_cast<float>(o.weight_decay);
    so.nesterov = o.nesterov;
    return std::make_unique<SGD>(store, so);
  }
  AdamOptions ao;
  ao.beta1 = static_cast<float>(o.beta1);
  ao.beta2 = static_cast<float>(o.beta2);
  ao.eps = static_cast<float>(o.eps);
  ao.weight_decay = static_cast<float>(o.weight_decay);
  if (o.name == "adamw") {
    ao.decoupled = true;
    return std::make_unique<AdamW>(store, ao);
  }
  return std::make_unique<Adam>(store, ao);
}


ModelSpec model_spec_for(const RunConfig& cfg, const Shape& sample_shape) {
  ModelSpec spec;
  spec.name = cfg.model.name;
  spec.variant = cfg.model.variant;
  spec.sample_shape = sample_shape;
  spec.options = cfg.model.options;
  if (spec.name == "neuron_inverter" && !spec.options.count("input_layout"))
    spec.options["input_layout"] = cfg.data.layout == "reinterpret" ? "view" : "transpose";
  return normalized(spec);
}

Shape reduced_sample_shape(const RunConfig& cfg) {
  const data::DataSpec ds = data_spec(cfg, data::Split::Train);
  Shape s = data::dataset_sample_shape(ds);
  check_scale_channels(cfg, s[0]);
  const int spatial = s.ndim() - 1;
  const auto& r = cfg.data.reduce;
  MRMF_CHECK_KIND(Config, r.empty() || r.size() == 1 || static_cast<int>(r.size()) == spatial, "config key 'data.reduce': ",
                  r.size(), " factors for data with ", spatial, " spatial axes (", ds.path, ")");
  static const char* names3[] = {"x (D)", "y (H)", "z (W)"};
  for (int a = 0; a < spatial && !r.empty(); ++a) {
    const int64_t f = r.size() == 1 ? r[0] : r[static_cast<size_t>(a)];
    const int64_t len = s[a + 1];
    MRMF_CHECK_KIND(Config, f >= 1 && len % f == 0, "config key 'data.reduce': ", ds.path, ": reduction factor ", f,
                    " does not divide axis ",
                    spatial == 1 ? "t" : names3[a], " of length ", len);
    s[a + 1] = len / f;
  }
  return s;
}

namespace {
std::string batchnorm_problem_in(Module& m, Shape& in) {
  if (auto* seq = dynamic_cast<Sequential*>(&m)) {
    for (size_t i = 0; i < seq->size(); ++i)
      if (std::string p = batchnorm_problem_in(seq->child(i), in); !p.empty()) return p;
    return {};
  }
  const std::string t = m.type();
  if ((t == "BatchNorm1d" || t == "BatchNorm3d" || t == "BnActPool") && in.ndim() >= 2 && in.numel() / in[1] <= 1)
    return "layer '" + m.name() + "' (input " + in.str() + ")";
  in = m.output_shape(in);
  return {};
}
}  // namespace

std::string batchnorm_batch_problem(Model& model, int64_t batch) {
  std::vector<int64_t> d{batch};
  for (int i = 0; i < model.sample_shape().ndim(); ++i) d.push_back(model.sample_shape()[i]);
  Shape in(d);
  return batchnorm_problem_in(model.net(), in);
}

void check_batchnorm_batch(Model& model, const RunConfig& cfg) {
  const std::string bn = batchnorm_batch_problem(model, cfg.train.batch_size);
  MRMF_CHECK_KIND(Config, bn.empty(), "config key 'train.batch_size': ", cfg.train.batch_size,
                  " sample(s) a rank leave BatchNorm ", bn,
                  " one value a channel in training, where it normalises over the batch; give at least 2");
}

void check_scale_channels(const RunConfig& cfg, int64_t channels) {
  MRMF_CHECK_KIND(Config, cfg.data.transform != "scale" || static_cast<int64_t>(cfg.data.scale.size()) == channels,
                  "config key 'data.scale': ", cfg.data.scale.size(), " factor(s) for data with ", channels,
                  " channels");
}

data::DataSpec data_spec(const RunConfig& cfg, data::Split split) {
  data::DataSpec d;
  d.format = data::parse_data_format(cfg.data.format);
  d.split = split;
  d.path = cfg.data.path;
  const std::string& files = split == data::Split::Train ? cfg.data.train_files
                             : split == data::Split::Val ? cfg.data.val_files
                                                         : cfg.data.test_files;
  if (!files.empty()) d.path = files;
  return d;
}

}  // namespace mrmf
