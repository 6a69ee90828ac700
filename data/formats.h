// Readers and writers for the scientific data sets, in the exact layouts of the
// original applications so that their files drop in (see shared/REFERENCE.md):
//
//   Neuron Inverter (Balewski): one HDF5 file; {train,val,test}_frames (N, T, C)
//     float32 or float16, {train,val,test}_unitStar_par (N, 19) float32, optional
//     `meta.JSON` string dataset.
//   CosmoFlow, MRMF authors' layout: many files, each `3Dmap` (n, D, H, W, 4)
//     uint16 (int16 and float32 accepted) and `unitPar` (n, 4) float32.
//   CosmoFlow, LBANN layout: one sample per file, `full` (4, D, H, W) float32 or
//     int16 and `unitPar` (4,).
//
// Every check failure is an mrmf::Error of kind Data whose message names the
// file, the dataset and what was expected, e.g.
//   "ni.h5: dataset 'train_frames' has rank 2, expected 3 (N, T, C)".
// Readers return the stored element type unconverted (frames stay float16 or
// uint16 so that the conversion can be fused into later kernels); labels are
// always float32. None of these classes is thread-safe (HDF5 is not).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/h5file.h"

namespace mrmf::data {

enum class Split { Train, Val, Test };
const char* split_name(Split s);               // "train", "val", "test"
Split parse_split(const std::string& name);    // Usage error otherwise
constexpr std::array<Split, 3> kAllSplits = {Split::Train, Split::Val, Split::Test};

struct Batch {
  Tensor frames;  // stored dtype: NI [count, T, C]; CosmoFlow [count, D, H, W, 4]; LBANN [4, D, H, W]
  Tensor labels;  // float32: [count, P] (LBANN: [P])
};

// ------------------------------------------------------------ Neuron Inverter
constexpr int64_t kNeuronParams = 19;

struct NeuronSplitInfo {
  int64_t n = 0, t = 0, c = 0, p = kNeuronParams;
  DType dtype = DType::F32;  // frames' stored type: F32 or F16
};

class NeuronInverterFile {
 public:
  // Opens and validates; every split in `required` must exist, other splits
  // are validated if present. All present splits must agree on T and C.
  static NeuronInverterFile open(const std::string& path,
                                 const std::vector<Split>& required = {Split::Train, Split::Val, Split::Test});

  const std::string& path() const { return path_; }
  bool has(Split s) const { return info_[static_cast<size_t>(s)].has_value(); }
  const NeuronSplitInfo& info(Split s) const;  // Data error if the split is absent
  std::optional<std::string> meta_json() const;

  // Samples [begin, begin + count) of a split.
  Batch read(Split s, int64_t begin, int64_t count) const;
  // Same into preallocated contiguous CPU tensors (pinned is fine) of shapes
  // [count, T, C] (stored dtype, or float32 to convert) and [count, 19] float32.
  void read_into(Split s, int64_t begin, Tensor& frames, Tensor& labels) const;

  static std::string frames_name(Split s);  // "train_frames"
  static std::string labels_name(Split s);  // "train_unitStar_par"

 private:
  std::string path_;
  H5File file_;
  std::array<std::optional<NeuronSplitInfo>, 3> info_;
};

// Writes a Balewski-layout file. Frames are passed as float32 and stored as
// `frames_dtype` (F32 or F16). Datasets are created with their final sizes
// first, then filled in row blocks so the generator never holds a whole split.
class NeuronInverterWriter {
 public:
  NeuronInverterWriter(const std::string& path, DType frames_dtype);
  void create_split(Split s, int64_t n, int64_t t, int64_t c, int64_t p = kNeuronParams);
  void write(Split s, int64_t begin, const Tensor& frames_f32, const Tensor& labels);
  void write_meta(const std::string& json);
  void close() { file_.close(); }

 private:
  H5File file_;
  DType dtype_;
};

// -------------------------------------------------- CosmoFlow, authors' layout
// A split given as a list of files, or one string that is a glob pattern
// ("dir/train/*.h5") or a comma-separated list; sorted for glob results.
std::vector<std::string> expand_file_list(const std::string& pattern_or_list);

class CosmoFlowFiles {
 public:
  static CosmoFlowFiles open(const std::vector<std::string>& paths);
  static CosmoFlowFiles open(const std::string& pattern_or_list) { return open(expand_file_list(pattern_or_list)); }

  size_t num_files() const { return paths_.size(); }
  const std::string& path(size_t f) const { return paths_.at(f); }
  int64_t samples(size_t f) const { return counts_.at(f); }
  int64_t total() const { return total_; }
  std::array<int64_t, 3> dims() const { return dims_; }  // D, H, W
  int64_t channels() const { return channels_; }        // 4
  int64_t params() const { return params_; }            // 4
  DType dtype() const { return dtype_; }                // U16, I16 or F32
  // Global sample index -> (file, index within file).
  std::pair<size_t, int64_t> locate(int64_t global) const;

  // Samples [begin, begin + count) of file f: frames [count, D, H, W, 4] stored dtype.
  Batch read(size_t f, int64_t begin, int64_t count) const;

 private:
  std::vector<std::string> paths_;
  std::vector<int64_t> counts_, first_;  // first_[f]: global index of file f's first sample
  int64_t total_ = 0, channels_ = 4, params_ = 4;
  std::array<int64_t, 3> dims_{};
  DType dtype_ = DType::U16;
};

// Writes one authors'-layout file: frames [n, D, H, W, 4] (U16, I16 or F32), labels [n, 4] float32.
void write_cosmoflow_file(const std::string& path, const Tensor& frames, const Tensor& labels);

// ---------------------------------------------------- CosmoFlow, LBANN layout
class CosmoFlowLbannFiles {
 public:
  static CosmoFlowLbannFiles open(const std::vector<std::string>& paths);
  static CosmoFlowLbannFiles open(const std::string& pattern_or_list) { return open(expand_file_list(pattern_or_list)); }
  size_t size() const { return paths_.size(); }
  const std::string& path(size_t i) const { return paths_.at(i); }
  std::array<int64_t, 3> dims() const { return dims_; }
  DType dtype() const { return dtype_; }  // F32 or I16
  // Sample i: frames [4, D, H, W] stored dtype, labels [4] float32.
  Batch read(size_t i) const;

 private:
  std::vector<std::string> paths_;
  std::array<int64_t, 3> dims_{};
  DType dtype_ = DType::F32;
};

void write_cosmoflow_lbann_file(const std::string& path, const Tensor& full, const Tensor& labels);

// ------------------------------------------------------------------ checks
// Flat index of the first NaN/Inf in a CPU tensor (F32, F16 or F64), or -1.
int64_t first_non_finite(const Tensor& t);
// Throws a Data error "<what>: non-finite value nan at index [i, j, k]" on the
// first bad value; `first_row` is added to i (t holds rows read from there on).
void check_finite(const Tensor& t, const std::string& what, int64_t first_row = 0);
// Throws a Data error naming `what` and the index of the first value where
// log1p is not finite (<= -1: a negative count); unsigned types pass.
void check_log1p_domain(const Tensor& t, const std::string& what, int64_t first_row = 0);

}  // namespace mrmf::data
