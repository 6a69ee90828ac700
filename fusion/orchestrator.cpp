#include "fusion/orchestrator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/log.h"
#include "core/stop_signal.h"
#include "core/version.h"
#include "fusion/bn_recalibrate.h"
#include "fusion/experiment_state.h"
#include "fusion/fuse.h"
#include "fusion/resample_top.h"
#include "fusion/stop_rules.h"

namespace mrmf {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

static double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

Orchestrator::Orchestrator(ExperimentConfig cfg, Communicator& world, Device device, std::string out_dir)
    : cfg_(std::move(cfg)), world_(world), device_(device), out_(std::move(out_dir)) {
  check_before_training();
}

RunConfig Orchestrator::stage_config(const Resolution& r, uint64_t seed, const StopRule& stop, double target,
                                     bool finetune) const {
  std::vector<std::string> sets = cfg_.run_sets;
  if (const auto* over = rung_overrides(cfg_, r)) sets.insert(sets.end(), over->begin(), over->end());
  if (finetune) sets.insert(sets.end(), cfg_.finetune_overrides.begin(), cfg_.finetune_overrides.end());
  sets.push_back("data.reduce=[" + resolution_key(r) + "]");
  sets.push_back("train.seed=" + std::to_string(seed));
  sets.push_back("stop.max_epochs=" + std::to_string(stop.max_epochs));
  sets.push_back("stop.plateau_threshold=" + fmt::format("{}", stop.threshold));
  sets.push_back("stop.plateau_patience=" + std::to_string(stop.patience));
  sets.push_back("stop.min_epochs=" + std::to_string(stop.min_epochs));
  sets.push_back("stop.plateau_reference=" + stop.reference);
  sets.push_back("stop.target_val_loss=" + fmt::format("{}", target));
  return parse_run_config(cfg_.run_yaml, sets, "experiment run configuration");
}

void Orchestrator::check_before_training() {
  // Fail before any training: a rung whose factors do not divide the data,
  // or whose data is too small for the model (the model is built per rung).
  std::vector<Resolution> rungs = cfg_.ladder;
  if (!cfg_.one_fusion_coarse.empty()) rungs.push_back(cfg_.one_fusion_coarse);
  // The original resolution first and unwrapped: an error there (a bad
  // model option, data the model does not take) is not the ladder's.
  {
    const RunConfig rc = stage_config(Resolution{1}, 1, StopRule{}, 0);
    (void)build_model(model_spec_for(rc, reduced_sample_shape(rc)));
  }
  for (const auto& r : rungs) {
    try {
      const RunConfig rc = stage_config(r, 1, StopRule{}, 0);
      (void)build_model(model_spec_for(rc, reduced_sample_shape(rc)));
    } catch (const Error& e) {  // name the experiment's key: the run config's data.reduce is set from it
      if (e.kind() != ErrorKind::Config && e.kind() != ErrorKind::Shape) throw;
      MRMF_THROW(Config, "experiment key 'ladder' (or 'one_fusion_coarse'): rung [", resolution_key(r),
                 "] does not fit the data or the model: ", e.message());
    }
  }
  // A guard shorter than the plateau rule's first chance always wins.
  for (size_t st = 0; st + 1 < cfg_.ladder.size(); ++st) {
    const StageStops stops = cfg_.stops_for_stage(st);
    for (const auto& [role, rule] : {std::make_pair("coarse", stops.coarse), std::make_pair("dense", stops.dense)})
      if (!PlateauRule(rule.threshold, rule.patience, rule.min_epochs).can_fire_within(rule.max_epochs))
        log::info("notice: stage {} {} stop rule (threshold {}, patience {}, min_epochs {}) cannot fire within its "
                  "{}-epoch guard; the guard will end that stage",
                  st + 1, role, rule.threshold, rule.patience, rule.min_epochs, rule.max_epochs);
  }
  // Allowed (configs/experiments/ni_gpu_short_control.yaml is such a
  // control: the same pretraining without the coarse resolution), but said.
  if (!cfg_.one_fusion_coarse.empty() && is_original(cfg_.one_fusion_coarse))
    log::info(
        "notice: one_fusion_coarse [{}] does not reduce the data: the one-fusion 'coarse' model trains at the "
        "original resolution (a control run, not MRMF)",
        resolution_key(cfg_.one_fusion_coarse));
  const auto uses = [&](const std::string& m) {
    return std::find(cfg_.methods.begin(), cfg_.methods.end(), m) != cfg_.methods.end();
  };
  if (cfg_.optimizer_at_fusion == "keep" && uses("mrt"))
    log::info("notice: optimizer_at_fusion: keep does not apply to MRT, which re-initialises the top layers and "
              "the optimizer state by definition");
  if (cfg_.optimizer_at_fusion == "keep" && uses("concurrent") && world_.size() >= 2)
    log::info("notice: optimizer_at_fusion: keep does not apply to concurrent training (each group's optimizer "
              "state stays on its own ranks); its fused model starts with fresh optimizer state");
  check_planned_stages();
}

int Orchestrator::dense_group_size(int world, double t_dense, double t_coarse) {
  MRMF_CHECK_KIND(Config, world >= 2, "a concurrent split needs at least two ranks, got ", world);
  MRMF_CHECK_KIND(Config, t_dense > 0 && t_coarse > 0, "concurrent split: epoch times must be positive (t_dense ",
                  t_dense, ", t_coarse ", t_coarse, ")");
  const double share = t_dense / (t_dense + t_coarse);
  const int want = static_cast<int>(std::lround(share * world));
  // Neither group may be empty: that would leave one model untrained.
  const int nd = std::min(std::max(want, 1), world - 1);
  if (nd != want)
    log::info("notice: the epoch-time split t_dense / (t_dense + t_coarse) = {:.3f} of {} ranks would leave the {} "
              "group empty; using {} dense and {} coarse rank(s)",
              share, world, want < 1 ? "dense" : "coarse", nd, world - nd);
  return nd;
}

std::string Orchestrator::split_balance_notice(int world, int nd, double t_dense, double t_coarse,
                                               const StageStops& stops, std::string* summary) {
  MRMF_CHECK_KIND(Config, nd >= 1 && nd < world, "concurrent split: ", nd, " dense rank(s) of ", world,
                  " leaves a group empty");
  // Data-parallel epochs scale with 1/ranks (the probe ran on all of them).
  const double epoch_d = t_dense * world / nd, epoch_c = t_coarse * world / (world - nd);
  if (summary)
    *summary = fmt::format(
        "dense group {} rank(s): ~{:.2f} s per epoch, <= {:.1f} s at its {}-epoch guard; coarse group {} rank(s): "
        "~{:.2f} s per epoch, <= {:.1f} s at its {}-epoch guard",
        nd, epoch_d, epoch_d * stops.dense.max_epochs, stops.dense.max_epochs, world - nd, epoch_c,
        epoch_c * stops.coarse.max_epochs, stops.coarse.max_epochs);
  const double ratio = std::max(epoch_d, epoch_c) / std::min(epoch_d, epoch_c);
  if (ratio <= 1.5) return {};
  const double ideal = t_dense / (t_dense + t_coarse) * world;
  const char *slow = epoch_d > epoch_c ? "dense" : "coarse", *fast = epoch_d > epoch_c ? "coarse" : "dense";
  return fmt::format(
      "notice: {} ranks cannot follow the epoch times (ideal {:.2f} dense : {:.2f} coarse): a {} epoch will take "
      "{:.1f}x a {} one, so the {} group waits unless its stage runs {:.1f}x the other's epochs",
      world, ideal, world - ideal, slow, ratio, fast, fast, ratio);
}

Orchestrator::Stage Orchestrator::train_stage(const std::string& name, const std::string& role, const Resolution& r,
                                              uint64_t seed, const StopRule& stop, double target,
                                              std::unique_ptr<Model> start, Communicator& comm, const std::string& dir,
                                              const std::function<void(Trainer&)>& before_fit,
                                              const std::function<bool()>& after_stop,
                                              const std::function<bool()>& end_extra_epoch,
                                              const std::function<bool()>& stop_requested_elsewhere) {
  const auto t0 = Clock::now();
  const RunConfig rc = stage_config(r, seed, stop, target, role == "finetune");
  TrainerOptions to;
  to.out_dir = dir;
  to.tag = name;
  to.write_checkpoints = cfg_.stage_checkpoints;
  to.check_data_identity = false;  // part of the experiment identity, compared across ranks at the start
  // A stage whose loss becomes NaN ends its run, recorded as diverged; the
  // experiment goes on with its other runs (a --resume would only repeat it).
  to.divergence_ends_run = true;
  to.resume = resume_;
  to.after_stop = after_stop;
  to.end_extra_epoch = end_extra_epoch;
  to.stop_requested_elsewhere = stop_requested_elsewhere;
  Stage s;
  s.trainer = std::make_unique<Trainer>(rc, comm, device_, to);
  if (start) {
    s.trainer->set_model(std::move(start));
    if (cfg_.bn_recalibration_batches > 0) {
      const BnRecalibration bn = recalibrate_batchnorm(s.trainer->model(), s.trainer->context(),
                                                       s.trainer->train_loader(), comm, cfg_.bn_recalibration_batches);
      if (bn.batches > 0)
        log::info("[{}] BN statistics re-estimated on {} batch(es) at this resolution ({:.2f} s)", name, bn.batches,
                  bn.seconds);
    }
  }
  if (before_fit) before_fit(*s.trainer);
  log::info("[{}] {} on {} rank(s): {} samples/rank/epoch, stop: plateau eps={} Tp={}{}, target {}, guard {} epochs",
            name, s.trainer->spec().str(), comm.size(), s.trainer->train_loader().samples_per_epoch(), stop.threshold,
            stop.patience, stop.reference == "best" ? " (against the best)" : "", target, stop.max_epochs);
  const FitResult fr = s.trainer->fit();
  s.trainer->release_data();  // later stages need the memory; this one's model and optimizer are what is kept
  s.result.name = name;
  s.result.role = role;
  s.result.resolution = resolution_key(r);
  // A resumed stage: the epochs an earlier process trained count as if this
  // one had (their records come from the metrics the checkpoint covers).
  s.result.epochs = static_cast<int64_t>(comm.allreduce_max(static_cast<double>(fr.resumed_epochs))) + fr.epochs();
  s.result.final_val_loss = fr.final_val_loss;
  s.result.stop_reason = fr.stop_reason;
  if (fr.overtime_epochs > 0)  // the same on every rank: after_stop answers alike
    s.result.stop_reason += fmt::format(" +{} while waiting", fr.overtime_epochs);
  s.result.history = fr.resumed_history;
  s.result.history.insert(s.result.history.end(), fr.history.begin(), fr.history.end());
  s.result.ranks = comm.size();
  s.result.time_s = comm.allreduce_max(since(t0)) + comm.allreduce_max(fr.resumed_s);
  if (fr.stop_reason == "diverged")
    log::info("[{}] notice: this stage diverged (non-finite loss); its run ends here and is recorded as diverged",
              name);
  if (fr.stop_reason == "max_epochs" && (stop.threshold > 0 || target > 0))
    log::info("[{}] notice: the {}-epoch guard stopped this stage before its {} fired", name, stop.max_epochs,
              target > 0 ? "target" : "plateau rule");
  return s;
}

std::string Orchestrator::run_dir(const std::string& label, uint64_t seed) const {
  return (fs::path(out_) / label / ("seed" + std::to_string(seed))).string();
}

uint64_t Orchestrator::dense_seed(uint64_t seed, size_t stage) const {
  return cfg_.shared_init ? seed : seed + 1000 * (stage + 1);
}

void Orchestrator::keep_optimizer_state(Trainer& fused, Trainer* coarse, Trainer* dense) {
  if (cfg_.optimizer_at_fusion != "keep") return;
  if (coarse) fused.optimizer().copy_group_state_from(coarse->optimizer(), ParamGroup::Bottom);
  if (dense) fused.optimizer().copy_group_state_from(dense->optimizer(), ParamGroup::Top);
}

MethodRun Orchestrator::run(const std::string& method, uint64_t seed, bool resume) {
  const std::string dir = run_dir(method, seed);
  resume_ = resume && cfg_.stage_checkpoints;
  // A new run starts clean: stage folders of an earlier, interrupted attempt
  // must not mix with this one's.
  if (!resume_) clear_run(method, seed);
  MethodRun r = method == "concurrent" ? run_concurrent(seed) : run_sequential(method, seed);
  r.mrmf = build_version();  // the build that finished it
  return r;
}

void Orchestrator::clear_run(const std::string& method, uint64_t seed) const {
  if (world_.is_root()) {
    std::error_code ec;
    fs::remove_all(run_dir(method, seed), ec);
    MRMF_CHECK_KIND(Data, !ec, "cannot empty ", run_dir(method, seed), " for a new run: ", ec.message());
  }
  world_.barrier();
}

void Orchestrator::drop_stage_checkpoints(const std::string& method, uint64_t seed) const {
  if (!world_.is_root()) return;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(run_dir(method, seed), ec)) {
    const std::string stage = e.path().filename().string();
    if (e.is_directory() && stage != "baseline" && stage != "finetune") fs::remove(e.path() / "checkpoint.h5", ec);
  }
}

MethodRun Orchestrator::run_sequential(const std::string& method, uint64_t seed, const std::string& label_in) {
  const std::string label = label_in.empty() ? method : label_in;
  MethodRun mr;
  mr.method = label;
  mr.seed = seed;
  const std::string dir = run_dir(label, seed);
  const auto ladder = cfg_.ladder_for(method);
  const double target = cfg_.target_val_loss;
  const StopRule final_rule{0, 0, cfg_.max_epochs};
  auto sub = [&](const std::string& n) { return (fs::path(dir) / n).string(); };
  // Every method ends with one stage on original data trained to the target:
  // the baseline itself, or the fine-tuning of the transferred / fused model.
  std::unique_ptr<Model> final_start;
  std::function<void(Trainer&)> before_final;
  std::unique_ptr<Trainer> prev_coarse, prev_dense;

  // A diverged stage ends its run: what it has, with a NaN final loss.
  const auto ended_by = [&](const StageResult& st) {
    if (st.stop_reason != "diverged") return false;
    mr.final_val_loss = std::numeric_limits<double>::quiet_NaN();
    mr.reached_target = false;
    for (const auto& s : mr.stages) mr.total_s += s.time_s;
    mr.total_s += mr.fusion_s;
    return true;
  };
  if (method == "mrt") {
    auto c = train_stage("mrt/coarse@" + resolution_key(ladder[0]), "coarse", ladder[0], seed,
                         cfg_.stops_for_stage(0).coarse, 0, nullptr, world_, sub("coarse"));
    mr.stages.push_back(c.result);
    mr.epochs_before_fusion += c.result.epochs;
    if (ended_by(c.result)) return mr;
    const auto t0 = Clock::now();
    const RunConfig rc = stage_config(ladder.back(), seed, final_rule, target, /*finetune=*/true);
    const ModelSpec dense_spec = model_spec_for(rc, reduced_sample_shape(rc));
    // A fresh top: initialised from a different stream than the coarse model's
    // (or, with mrt_top: resample, the coarse model's top resampled).
    final_start = mrt_transfer(cfg_.mrt_top, c.trainer->model(), dense_spec, device_, seed + 7919);
    if (cfg_.mrt_top == "resample") {
      const Shape from = flattened_feature_shape(c.trainer->model()), to = flattened_feature_shape(*final_start);
      if (from == to)
        log::info("mrt: the whole top group carried over; the flattened features are {} at both resolutions, "
                  "nothing to resample (mrt_top: resample)",
                  from.str());
      else
        log::info(
            "mrt: the top group carried over, its layers on the flattened features resampled from {} to {} "
            "(mrt_top: resample)",
            from.str(), to.str());
    }
    mr.fusion_s += since(t0);
  } else if (method != "baseline") {
    // With optimizer_at_fusion = keep, a trainer that starts from a fused
    // model takes the bottom's optimizer state from the coarse trainer and
    // the top's from the dense one (reset is the default: fresh state).
    auto keep = [&](Trainer& t) { keep_optimizer_state(t, prev_coarse.get(), prev_dense.get()); };
    for (size_t st = 0; st + 1 < ladder.size(); ++st) {
      const StageStops stops = cfg_.stops_for_stage(st);
      const std::string prefix = label + "/stage" + std::to_string(st + 1) + "/";
      // The coarse model of a later stage is the previous stage's fused model.
      auto c = train_stage(prefix + "coarse@" + resolution_key(ladder[st]), "coarse", ladder[st], seed, stops.coarse,
                           0, std::move(final_start), world_, sub("stage" + std::to_string(st + 1) + "_coarse"),
                           st > 0 ? std::function<void(Trainer&)>(keep) : nullptr);
      mr.stages.push_back(c.result);
      mr.epochs_before_fusion += c.result.epochs;
      if (ended_by(c.result)) return mr;  // no dense model to train for a fusion that cannot happen
      auto d =
          train_stage(prefix + "dense@" + resolution_key(ladder[st + 1]), "dense", ladder[st + 1], dense_seed(seed, st),
                      stops.dense, 0, nullptr, world_, sub("stage" + std::to_string(st + 1) + "_dense"));
      mr.stages.push_back(d.result);
      mr.epochs_before_fusion += d.result.epochs;
      if (ended_by(d.result)) return mr;
      const auto t0 = Clock::now();
      final_start = fuse_models(c.trainer->model(), d.trainer->model(), d.trainer->spec(), device_, seed);
      mr.fusion_s += since(t0);
      prev_coarse = std::move(c.trainer);
      prev_dense = std::move(d.trainer);
    }
    before_final = keep;
  }
  const bool baseline = method == "baseline";
  auto f = train_stage(label + (baseline ? "/baseline@1" : "/finetune@1"), baseline ? "baseline" : "finetune",
                       ladder.back(), seed, final_rule, target, std::move(final_start), world_,
                       sub(baseline ? "baseline" : "finetune"), before_final);
  mr.stages.push_back(f.result);
  mr.epochs_after_fusion = f.result.epochs;
  const StageResult& last = mr.stages.back();
  mr.final_val_loss = last.final_val_loss;
  mr.reached_target = last.stop_reason == "target";
  for (const auto& s : mr.stages) mr.total_s += s.time_s;
  mr.total_s += mr.fusion_s;
  return mr;
}

std::optional<int> Orchestrator::concurrent_split(const std::string& dir, const Resolution& coarse, uint64_t seed,
                                                  double* probe_s) {
  const auto t0 = Clock::now();
  // A resumed run keeps its first attempt's split: its groups' checkpoints
  // were written by that many ranks (a new probe could move the split).
  const fs::path record = fs::path(dir) / "split.json";
  std::string saved;
  if (world_.is_root() && resume_ && fs::exists(record)) {
    std::ifstream in(record);
    std::stringstream text;
    text << in.rdbuf();
    saved = text.str();
  }
  saved = world_.broadcast_string(saved, 0);
  if (!saved.empty()) {
    const auto j = nlohmann::json::parse(saved, nullptr, false);
    if (!j.is_discarded() && j.contains("dense_ranks") && j["dense_ranks"].is_number_integer()) {
      const int nd = j["dense_ranks"].get<int>();
      if (nd >= 1 && nd < world_.size()) {
        *probe_s = j.contains("probe_s") && j["probe_s"].is_number() ? j["probe_s"].get<double>() : 0.0;
        log::info("concurrent split of the interrupted run kept: {} rank(s) dense, {} rank(s) coarse", nd,
                  world_.size() - nd);
        return nd;
      }
    }
  }
  const auto times = probe_epoch_times(coarse, seed);
  *probe_s = cfg_.concurrent_times.empty() ? world_.allreduce_max(since(t0)) : 0.0;  // given times cost nothing
  if (!times) return std::nullopt;  // not recorded: a --resume probes again
  const auto [t_dense, t_coarse] = *times;
  const int nd = dense_group_size(world_.size(), t_dense, t_coarse);
  log::info("concurrent split: {} rank(s) dense, {} rank(s) coarse (t_dense {:.2f} s, t_coarse {:.2f} s)", nd,
            world_.size() - nd, t_dense, t_coarse);
  std::string balance;
  const std::string notice =
      split_balance_notice(world_.size(), nd, t_dense, t_coarse, cfg_.stops_for_stage(0), &balance);
  log::info("concurrent groups: {}", balance);
  if (!notice.empty()) log::info("{}", notice);
  if (world_.is_root()) {
    fs::create_directories(dir);
    std::ofstream(record) << nlohmann::json{{"dense_ranks", nd},
                                            {"t_dense", t_dense},
                                            {"t_coarse", t_coarse},
                                            {"probe_s", *probe_s}}
                                 .dump()
                          << "\n";
  }
  return nd;
}

std::optional<std::pair<double, double>> Orchestrator::probe_epoch_times(const Resolution& coarse, uint64_t seed) {
  if (!cfg_.concurrent_times.empty()) return std::make_pair(cfg_.concurrent_times[0], cfg_.concurrent_times[1]);
  double t[2];
  const Resolution res[2] = {cfg_.ladder.back(), coarse};
  for (int i = 0; i < 2; ++i) {
    TrainerOptions to;
    to.check_data_identity = false;
    to.progress = false;
    try {  // named: a probe's error (a divergence) said nothing of the probe
      Trainer probe(stage_config(res[i], seed, StopRule{}, 0), world_, device_, to);
      probe.time_steps(1);  // warm-up: primitive creation, first-touch allocations
      const double per_step = probe.time_steps(cfg_.probe_steps);
      t[i] = world_.allreduce_max(per_step * static_cast<double>(probe.train_loader().batches_per_epoch()));
    } catch (const NonFiniteLoss& e) {
      // The stage the probe times would diverge as well: the run is recorded
      // as diverged and the experiment goes on with its other runs, as after
      // a stage's divergence (ending the experiment lost them).
      log::info(
          "[concurrent] notice: the split probe of rung [{}] diverged ({}); this run ends here and is recorded "
          "as diverged",
          resolution_key(res[i]), e.message());
      return std::nullopt;
    } catch (const Error& e) {
      detail::throw_error(e.kind(), "mrmf", "",
                          detail::concat("the concurrent split probe (rung [", resolution_key(res[i]),
                                         "], which times a few steps to size the rank groups; "
                                         "experiment.concurrent_times gives the epoch times instead): ",
                                         e.message()),
                          __FILE__, __LINE__);
    }
  }
  log::info("concurrent probe: dense epoch ~{:.2f} s, coarse epoch ~{:.2f} s", t[0], t[1]);
  return std::make_pair(t[0], t[1]);
}

std::unique_ptr<Model> exchange_and_fuse(Communicator& world, int coarse_root, std::unique_ptr<Model> mine,
                                         const ModelSpec& coarse_spec, const ModelSpec& dense_spec, Device device,
                                         uint64_t seed) {
  const bool dense_rank = world.rank() < coarse_root;
  std::unique_ptr<Model> mc = dense_rank ? nullptr : std::move(mine);
  std::unique_ptr<Model> md = dense_rank ? std::move(mine) : nullptr;
  auto skeleton = [&](const ModelSpec& s) {
    auto m = build_model(s);
    m->build(device, seed, default_init_scheme(s));
    return m;
  };
  if (!mc) mc = skeleton(coarse_spec);
  if (!md) md = skeleton(dense_spec);
  MRMF_CHECK_KIND(Shape, mc->params().layout_hash() == skeleton(coarse_spec)->params().layout_hash(),
                  "concurrent exchange: the coarse model does not match its spec ", coarse_spec.str());
  // Each rank broadcasts as many bytes as its own copy holds: a trained
  // model and the other group's skeleton of it that differ would make the
  // broadcasts disagree (MPI: a truncation error; NCCL: a hang until the
  // watchdog, or memory overrun). Compared first, on every rank.
  world.check_same_on_all_ranks(mc->params().layout_hash(), "the coarse model's layout at the concurrent exchange");
  world.check_same_on_all_ranks(md->params().layout_hash(), "the dense model's layout at the concurrent exchange");
  Stream& st = cpu_stream();
  world.broadcast(mc->params().values(), coarse_root, st);
  world.broadcast(mc->params().buffers(), coarse_root, st);
  world.broadcast(md->params().values(), 0, st);
  world.broadcast(md->params().buffers(), 0, st);
  return fuse_models(*mc, *md, dense_spec, device, seed);
}

namespace {
// Test hook: MRMF_FAULT_SIGNAL_WAITING=R sends SIGTERM to this process on
// world rank R when its concurrent group's stage has ended and it waits for
// the other group (where no training step looks at the signal).
void maybe_signal_while_waiting(int rank) {
  const char* env = std::getenv("MRMF_FAULT_SIGNAL_WAITING");
  if (env != nullptr && std::string(env) == std::to_string(rank) && !send_stop_signal_to_self(SIGTERM))
    log::warn("MRMF_FAULT_SIGNAL_WAITING: SIGTERM was not recorded within 10 s");
}
}  // namespace

MethodRun Orchestrator::run_concurrent(uint64_t seed) {
  if (world_.size() < 2) {
    log::info("notice: concurrent training needs at least two ranks; running the one-fusion stages sequentially");
    return run_sequential("mrmf1", seed, "concurrent");
  }
  MethodRun mr;
  mr.method = "concurrent";
  mr.concurrent_groups = true;
  mr.seed = seed;
  const std::string dir = run_dir("concurrent", seed);
  const auto ladder = cfg_.ladder_for("concurrent");
  const std::optional<int> split = concurrent_split(dir, ladder[0], seed, &mr.split_probe_s);
  if (!split) {  // the probe diverged: no stage trained
    mr.final_val_loss = std::numeric_limits<double>::quiet_NaN();
    mr.reached_target = false;
    mr.total_s = mr.split_probe_s;
    return mr;
  }
  const int nd = *split;
  const bool dense_rank = world_.rank() < nd;
  Communicator group = world_.split(dense_rank ? 0 : 1, world_.rank());
  const StageStops stops = cfg_.stops_for_stage(0);

  // With concurrent_overtime, the group whose stage stops first trains on
  // until the other's has stopped too. Each group's root (world rank 0 for
  // the dense group, nd for the coarse one) signals the other root when its
  // stage stops; a group trains one more epoch while the other's signal has
  // not arrived (the root looks, the group follows its root's answer). A
  // stage restored as stopped by --resume does not train on (it signals).
  const int my_root = dense_rank ? 0 : nd, other_root = dense_rank ? nd : 0;
  constexpr int kDoneTag = 7301;
  bool signalled = false;
  // Whether the other group's signal is there: the root looks (polling for
  // up to wait_ms), the group follows its answer.
  const auto other_done = [&](int wait_ms) {
    const double seen = world_.rank() == my_root && world_.signal_arrived(other_root, kDoneTag, wait_ms) ? 1.0 : 0.0;
    return group.allreduce_max(seen) > 0;
  };
  const auto signal_done = [&] {
    if (!signalled && world_.rank() == my_root) world_.send_signal(other_root, kDoneTag);
    signalled = true;
  };
  std::function<bool()> train_on, end_extra;
  if (cfg_.concurrent_overtime) {
    train_on = [&] {
      // Signal before looking: two groups stopping together then both see
      // the other's signal and neither trains on.
      const bool first_call = !signalled;
      signal_done();
      // 50 ms of polling: one MPI_Iprobe does not always see a message that
      // was sent long before (MPICH/UCX moves it during several polls; with
      // a single probe the 2-rank test's last group trained an extra epoch).
      const bool go_on = !other_done(50);
      if (first_call && go_on)
        log::info("[concurrent] this group is done first: training on while the other group finishes");
      return go_on;
    };
    // ... and ends an extra epoch at the first step after that signal: the
    // other group then waits a step for this one, not the rest of an epoch
    // (one probe per step, no polling: the steps keep MPI moving).
    end_extra = [&] { return other_done(0); };
  }
  // A stop signal (a job's time limit) that reaches only one group's ranks
  // stops that group at its next step; its root tells the other root, whose
  // group then stops at its next step too, both with checkpoints. A rank
  // whose group is no longer training (its stage done, waiting below) tells
  // the other root itself. (Without this, the other group trained on alone,
  // and the job ended when main() gave up waiting for it two minutes later:
  // MPI_Abort.)
  constexpr int kStopTag = 7302;
  const auto stopped_elsewhere = [&] {
    return world_.rank() == my_root && world_.signal_arrived(MPI_ANY_SOURCE, kStopTag, 0);
  };
  bool told = false;
  const std::function<void()> tell_if_signalled = [&]() noexcept {
    if (told || stop_signal_received() == 0) return;
    told = true;
    try {
      world_.send_signal(other_root, kStopTag);
    } catch (const std::exception& e) {  // the other group then ends at the job's end
      log::warn("[concurrent] could not tell the other group of the stop signal: {}", e.what());
    }
  };
  Stage mine;
  std::exception_ptr stopped;  // this group's StopRequested, rethrown once both groups are here
  try {
    const log::Speaker speaker(group.rank() == 0);  // each group's root shows its progress
    mine = dense_rank ? train_stage("concurrent/dense@1", "dense", ladder[1], dense_seed(seed, 0), stops.dense, 0,
                                    nullptr, group, (fs::path(dir) / "stage1_dense").string(), {}, train_on, end_extra,
                                    stopped_elsewhere)
                      : train_stage("concurrent/coarse@" + resolution_key(ladder[0]), "coarse", ladder[0], seed,
                                    stops.coarse, 0, nullptr, group, (fs::path(dir) / "stage1_coarse").string(), {},
                                    train_on, end_extra, stopped_elsewhere);
  } catch (const StopRequested&) {
    stopped = std::current_exception();
    told = true;  // by the root, for the whole group
    if (world_.rank() == my_root) world_.send_signal(other_root, kStopTag);
  }
  maybe_signal_while_waiting(world_.rank());
  if (cfg_.concurrent_overtime) {
    signal_done();  // a stage restored as finished (or stopped) never asked
    if (world_.rank() == my_root) world_.idle_receive_signal(other_root, kDoneTag, 20, tell_if_signalled);
  }

  // The group done first waits here for the other, asleep (MPICH would
  // otherwise busy-poll a core per waiting rank beside the group still
  // training), and outside the fusion's clock: that wait is the pre-fusion
  // stage's (max of the two groups' times, below). Timed from each rank's
  // own arrival instead, the 2-rank CPU experiment of session 14 booked the
  // faster group's ~25 s wait as "fusion" and counted it twice in total_s.
  world_.idle_barrier(20, tell_if_signalled);
  // A stop in either group ends the run on every rank, in order: the
  // stopped group's error, and for a group whose stage had already ended,
  // one that says so (its stage is recorded as finished; --resume fuses).
  const int sig = stop_signal_received();
  if (world_.allreduce_max(stopped || sig != 0 ? 1.0 : 0.0) > 0) {
    // The roots consume the signals sent to them (every one was sent before
    // the barrier; a few ms let the last arrive).
    if (world_.rank() == my_root)
      while (world_.signal_arrived(MPI_ANY_SOURCE, kStopTag, 20)) world_.idle_receive_signal(MPI_ANY_SOURCE, kStopTag);
    if (stopped) std::rethrow_exception(stopped);
    note_stopped_by_signal();
    throw StopRequested(ErrorKind::Runtime,
                        fmt::format("concurrent {} group: its stage had finished when {} (a job's time limit?) "
                                    "stopped the run; the same command with --resume continues",
                                    dense_rank ? "dense" : "coarse",
                                    sig != 0 ? stop_signal_name(sig) : "a stop signal to another rank"));
  }
  // Both groups' stage records, on every rank (rank 0 writes the report).
  const std::string my_json = stage_to_json(mine.result).dump();
  const StageResult dense_res = stage_from_json(nlohmann::json::parse(world_.broadcast_string(my_json, 0)));
  const StageResult coarse_res = stage_from_json(nlohmann::json::parse(world_.broadcast_string(my_json, nd)));
  mr.stages.push_back(coarse_res);
  mr.stages.push_back(dense_res);
  mr.epochs_before_fusion = coarse_res.epochs + dense_res.epochs;
  const double pre_fusion_s = std::max(coarse_res.time_s, dense_res.time_s);
  // A group whose stage diverged ends the run, as a sequential run's stage
  // does: there is no model to fuse, and fine-tuning one with non-finite
  // weights would only diverge again, after the exchange.
  if (coarse_res.stop_reason == "diverged" || dense_res.stop_reason == "diverged") {
    log::info(
        "[concurrent] notice: the {} group's stage diverged (non-finite loss); this run ends here and is "
        "recorded as diverged",
        coarse_res.stop_reason == "diverged" ? "coarse" : "dense");
    mr.final_val_loss = std::numeric_limits<double>::quiet_NaN();
    mr.reached_target = false;
    mr.total_s = mr.split_probe_s + pre_fusion_s;
    return mr;
  }
  // Exchange: the dense group's root (world rank 0) and the coarse group's
  // root (world rank nd) broadcast their models' flat buffers to everyone.
  const auto tf = Clock::now();
  const RunConfig rc_c = stage_config(ladder[0], seed, StopRule{}, 0), rc_d = stage_config(ladder[1], seed, StopRule{}, 0);
  const ModelSpec spec_c = model_spec_for(rc_c, reduced_sample_shape(rc_c));
  const ModelSpec spec_d = model_spec_for(rc_d, reduced_sample_shape(rc_d));
  auto fused = exchange_and_fuse(world_, nd, mine.trainer->release_model(), spec_c, spec_d, device_, seed);
  mr.fusion_s = world_.allreduce_max(since(tf));
  mine.trainer.reset();

  auto f = train_stage("concurrent/finetune@1", "finetune", ladder[1], seed, StopRule{0, 0, cfg_.max_epochs},
                       cfg_.target_val_loss, std::move(fused), world_, (fs::path(dir) / "finetune").string());
  mr.stages.push_back(f.result);
  mr.epochs_after_fusion = f.result.epochs;
  mr.final_val_loss = f.result.final_val_loss;
  mr.reached_target = f.result.stop_reason == "target";
  // The groups trained at the same time: the slower one's stage is the
  // pre-fusion time (its time_s includes epochs of an interrupted attempt).
  mr.total_s = mr.split_probe_s + pre_fusion_s + mr.fusion_s + f.result.time_s;
  return mr;
}

}  // namespace mrmf
