// Checks before an experiment trains anything: every stage every planned run
// will train is set up as far as it can be without reading samples (its run
// configuration with the real stop rules and target, its data shards for
// its rank count, its model and --init checkpoint, the fusions and
// transfers between its rungs). An error an hour into an experiment (a
// resolution override that empties a shard, a rung whose model does not
// fuse with the next) is an error now, before anything is trained or an
// earlier report is replaced.
#include <fmt/format.h>

#include <functional>
#include <map>
#include <set>

#include "core/log.h"
#include "fusion/checkpoint.h"
#include "fusion/fuse.h"
#include "fusion/orchestrator.h"
#include "fusion/resample_top.h"

namespace mrmf {

namespace {
[[noreturn]] void rethrow_as(ErrorKind kind, const std::string& message) {
  detail::throw_error(kind, "mrmf", "", message, __FILE__, __LINE__);
}
}  // namespace

std::unique_ptr<Model> check_run_before_training(const RunConfig& cfg, const Communicator& comm, int ranks,
                                                 Device device, ModelSpec* spec_out,
                                                 std::set<std::string>* data_checked) {
  MRMF_CHECK_KIND(Config, !cfg.data.path.empty() || !cfg.data.train_files.empty(),
                  "config key 'data.path': no dataset given");
  const Shape sample = reduced_sample_shape(cfg);
  const ModelSpec spec = model_spec_for(cfg, sample);
  auto model = build_model(spec);
  model->build(Device::cpu(), cfg.train.seed, default_init_scheme(spec));
  check_batchnorm_batch(*model, cfg);
  if (!cfg.train.init.empty()) (void)init_from_checkpoint(cfg, *model, spec);
  for (const bool training : {true, false}) {
    data::LoaderOptions lo = loader_options(cfg, comm, device, training);
    lo.world = ranks;
    lo.rank = 0;
    const data::DataSpec ds = data_spec(cfg, training ? data::Split::Train : data::Split::Val);
    // Rungs read the same files (at other reductions): a CosmoFlow split of
    // thousands of files on a parallel file system is opened once here.
    const std::string key =
        fmt::format("{}|{}|{}|{}|{}|{}", data::data_format_name(ds.format), ds.path, data::split_name(ds.split),
                    lo.batch_size, lo.world, lo.reduce_on == data::ReduceOn::Device);
    if (data_checked && !data_checked->insert(key).second) continue;
    data::check_loader(ds, lo);
  }
  // The two splits at different resolutions (a coarse copy in the wrong
  // place) were found only when the first stage's trainer opened them.
  const data::DataSpec train = data_spec(cfg, data::Split::Train), val = data_spec(cfg, data::Split::Val);
  const std::string pair = fmt::format("shapes|{}|{}|{}", data::data_format_name(train.format), train.path, val.path);
  if (!data_checked || data_checked->insert(pair).second) {
    const Shape ts = data::dataset_sample_shape(train), vs = data::dataset_sample_shape(val);
    MRMF_CHECK_KIND(Data, ts == vs, "the val split (", val.path, ") has samples of ", vs.str(), ", the train split (",
                    train.path, ") of ", ts.str(), "; expected the same");
  }
  if (spec_out) *spec_out = spec;
  return model;
}

void Orchestrator::check_planned_stages() const {
  const uint64_t seed = cfg_.seeds.empty() ? 1 : cfg_.seeds.front();
  const int world = world_.size();
  const StopRule final_rule{0, 0, cfg_.max_epochs};
  struct Built {
    std::unique_ptr<Model> model;
    ModelSpec spec;
  };
  std::map<std::string, Built> built;  // per (rung, ranks): checked once
  std::set<std::string> data_checked;
  // One stage: its configuration (the stop rule and target as the run will
  // give them) and what it will read and build, errors named by the stage.
  const auto stage = [&](const std::string& name, const Resolution& r, const StopRule& rule, double target, int ranks,
                         bool finetune = false) -> Built& {
    try {
      const RunConfig rc = stage_config(r, seed, rule, target, finetune);
      const bool own = finetune && !cfg_.finetune_overrides.empty();  // else the same as the rung's
      const std::string key = resolution_key(r) + "/" + std::to_string(ranks) + (own ? "/finetune" : "");
      auto it = built.find(key);
      if (it == built.end()) {
        Built b;
        b.model = check_run_before_training(rc, world_, ranks, device_, &b.spec, &data_checked);
        it = built.emplace(key, std::move(b)).first;
      }
      return it->second;
    } catch (const Error& e) {
      rethrow_as(e.kind(), detail::concat("checked before training: stage ", name, " (", ranks,
                                          " rank(s)) cannot run: ", e.message()));
    }
  };
  const auto fuse_check = [&](const std::string& name, const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      rethrow_as(ErrorKind::Config,
                 detail::concat("checked before training: ", name, " cannot be built: ", e.message(),
                                " (do the rungs' resolution_overrides give them different models?)"));
    }
  };
  for (const auto& method : cfg_.methods) {
    const auto ladder = cfg_.ladder_for(method);
    const std::string last = resolution_key(ladder.back());
    if (method == "baseline") {
      stage("baseline@" + last, ladder.back(), final_rule, cfg_.target_val_loss, world);
      continue;
    }
    if (method == "mrt") {
      Built& c = stage("mrt/coarse@" + resolution_key(ladder[0]), ladder[0], cfg_.stops_for_stage(0).coarse, 0, world);
      Built& f = stage("mrt/finetune@" + last, ladder.back(), final_rule, cfg_.target_val_loss, world, true);
      fuse_check("the MRT transfer from rung [" + resolution_key(ladder[0]) + "]",
                 [&] { (void)mrt_transfer(cfg_.mrt_top, *c.model, f.spec, Device::cpu(), seed); });
      continue;
    }
    // mrmfN, and concurrent (one fusion; its groups' sizes are known now
    // only when the epoch times are given, otherwise a probe sets them:
    // then as one rank, the largest shard -- what fails there fails in any
    // group, and nothing is refused that a group could run).
    int dense_ranks = world, coarse_ranks = world;
    if (method == "concurrent" && world >= 2) {
      dense_ranks = coarse_ranks = 1;
      if (cfg_.concurrent_times.size() == 2) {
        dense_ranks = dense_group_size(world, cfg_.concurrent_times[0], cfg_.concurrent_times[1]);
        coarse_ranks = world - dense_ranks;
      }
    }
    // The split probe times a few steps of both rungs on every rank: a
    // shard too small for that failed after the earlier runs had trained.
    if (method == "concurrent" && world >= 2 && cfg_.concurrent_times.size() != 2)
      for (const Resolution& r : {ladder.front(), ladder.back()})
        stage("concurrent/split probe@" + resolution_key(r), r, StopRule{}, 0, world);
    for (size_t st = 0; st + 1 < ladder.size(); ++st) {
      const StageStops stops = cfg_.stops_for_stage(st);
      const std::string prefix = method + "/stage" + std::to_string(st + 1) + "/";
      Built& c = stage(prefix + "coarse@" + resolution_key(ladder[st]), ladder[st], stops.coarse, 0, coarse_ranks);
      Built& d = stage(prefix + "dense@" + resolution_key(ladder[st + 1]), ladder[st + 1], stops.dense, 0, dense_ranks);
      fuse_check("the fusion of " + prefix + " (rungs [" + resolution_key(ladder[st]) + "] and [" +
                     resolution_key(ladder[st + 1]) + "])",
                 [&] { (void)fuse_models(*c.model, *d.model, d.spec, Device::cpu(), seed); });
    }
    stage(method + "/finetune@" + last, ladder.back(), final_rule, cfg_.target_val_loss, world, true);
  }
}

}  // namespace mrmf
