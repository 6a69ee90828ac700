// Training checkpoints: one HDF5 file that restores a run exactly and that a
// model can be rebuilt from alone.
//
// Layout (format "mrmf-checkpoint", version 1):
//   /                          attributes (strings): format, format_version, model, variant,
//                              sample_shape ("4,32,32,32"), model_options ("k=v" lines), layout_hash
//   /model/<state_dict name>   every parameter and buffer in PyTorch layout (float32;
//                              num_batches_tracked as a 0-dim int64, like PyTorch);
//                              attributes group ("bottom"|"top") and kind ("param"|"buffer")
//   /optimizer                 attributes: type ("Adam", "AdamW", "SGD"), hyper-parameters
//                              (beta1, beta2, eps, weight_decay, decoupled | momentum, dampening,
//                              weight_decay, nesterov), step_bottom, step_top, frozen_bottom, frozen_top
//   /optimizer/<state>/<param> each state tensor (exp_avg, exp_avg_sq, momentum_buffer), per
//                              parameter and shaped like it -- torch.optim keeps state per
//                              parameter too, and this is independent of our flat-buffer padding
//   /scheduler                 float64 attributes: the LrSchedule::state() map; "describe" string
//   /epoch, /step              int64 scalars
//   /state/<key>               int64 or float64 scalars: RNG and loader positions
//   /config                    the run's config text (YAML)
//
// Damage is detected, not read: the file has HDF5 1.10's format, whose
// superblock, object headers (every attribute, and the scalars and the
// config text, stored compact inside them) and chunk indexes carry
// checksums; every tensor is chunked with a Fletcher-32 checksum. A
// changed byte makes the read fail ("incorrect metadata checksum", "data
// error detected by Fletcher32 checksum"), naming the file. HDF5 1.10 or
// later reads these files (h5py does); checkpoints written before this
// have no checksums and read as before.
//
// Strings are stored fixed-length, UTF-8 (h5py reads them as bytes:
// `.decode()`); older checkpoints' variable-length ones are read too
// (H5File::write_string says why).
//
// Writing is atomic: the file is written under a temporary name, fsync'ed and
// renamed over the final path, so an existing checkpoint stays intact when a
// save fails midway (disk full, crash, exception).
//
// Loading validates the model name, variant and input shape, every
// parameter's presence and shape; errors (kind Data for missing/foreign
// content, Shape for shape mismatches) name the parameter, the file and both
// shapes. Nothing is copied unless everything validates.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "layers/module.h"
#include "models/registry.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"

namespace mrmf {

// One number of the generic state map. RNG seeds/counters are uint64 in
// places: store them bit-cast to int64 (static_cast<int64_t>), never as double.
using StateValue = std::variant<int64_t, double>;
using StateMap = std::map<std::string, StateValue>;

// What a trainer saves besides the model, optimizer and scheduler.
struct TrainingState {
  int64_t epoch = 0;  // epochs completed
  int64_t step = 0;   // optimizer steps completed
  StateMap state;     // keys without '/'
  std::string config;  // the run's config text
  // The builds (core/version.h) that trained this run, oldest first, each
  // once in a row; provenance only, never compared (attribute "trained_by").
  std::vector<std::string> trained_by;
};

struct SaveOptions {
  // Device tensors are copied to the host on this stream, which is
  // synchronized first (pass the training context's stream on CUDA).
  Stream* stream = nullptr;
  bool fsync = true;
  // Called after each item is written (its name); for progress and for tests
  // that simulate a failure midway by throwing from it.
  std::function<void(const std::string&)> after_item;
  // Optional [ranks, buffer count] float32 CPU tensor: every rank's buffers
  // (BN running statistics) at a checkpoint inside an epoch, where each
  // rank's are still its own (they are averaged at the epoch's end), so that
  // a resume on as many ranks continues bit for bit. Written as
  // "rank_buffers".
  Tensor rank_buffers;
};

// Writes `path` atomically. `opt` and `sched` may be null (not saved).
void save_checkpoint(const std::string& path, const ModelSpec& spec, const Model& model, const Optimizer* opt,
                     const LrSchedule* sched, const TrainingState& ts, const SaveOptions& options = {});

// Sets the model's buffers to row `rank` of the checkpoint's
// "rank_buffers" when it has them for `ranks` ranks; false otherwise (the
// buffers stay as load_params set them: rank 0's).
bool load_rank_buffers(const std::string& path, Model& model, int rank, int ranks, Stream* stream = nullptr);

// Everything but the tensors.
struct CheckpointHeader {
  ModelSpec spec;  // normalized
  std::string layout_hash;
  TrainingState training;
  bool has_optimizer = false;
  std::string optimizer_type;
  bool has_scheduler = false;  // its state: load_scheduler_state
};
CheckpointHeader read_checkpoint_header(const std::string& path);

struct ParamLoadOptions {
  // Empty: every parameter and buffer (strict: the file must hold exactly the
  // model's names). Otherwise only these groups (`--init bottom`); other
  // entries of the model stay untouched and extra file entries are ignored.
  std::vector<ParamGroup> groups;
  // Must equal the checkpoint's variant when non-empty (the Model object does
  // not know its variant; the caller's spec does).
  std::string expect_variant;
  // Full loads require the checkpoint's input shape to equal the model's.
  // Group loads never do: a coarse checkpoint initialises a dense model's bottom.
  bool check_input_shape = true;
  // Report the loaded groups as the ones to freeze (the optimizer freezes).
  bool freeze_loaded = false;
  Stream* stream = nullptr;  // host -> device copies (synchronized at the end)
};

struct ParamLoadReport {
  std::vector<std::string> loaded;    // names copied
  std::vector<ParamGroup> freeze;     // groups the caller should freeze (freeze_loaded)
};

ParamLoadReport load_params(const std::string& path, Model& model, const ParamLoadOptions& options = {});

// Restores the optimizer's state tensors, step counts and frozen flags. The
// optimizer type must match; the hyper-parameters in the file are informative
// (the run's config decides them), a difference is logged.
void load_optimizer_state(const std::string& path, Optimizer& opt, Stream* stream = nullptr);
// Restores LrSchedule::load_state from /scheduler.
void load_scheduler_state(const std::string& path, LrSchedule& sched);

struct LoadedModel {
  std::unique_ptr<Model> model;
  CheckpointHeader header;
};
// Rebuilds the model from the checkpoint's spec on `device` and loads all parameters.
LoadedModel load_model_from_checkpoint(const std::string& path, Device device);

}  // namespace mrmf
