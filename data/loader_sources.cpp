// The loader's data sources; see data/loader_sources.h.
#include "data/loader_sources.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include "core/error.h"
#include "core/log.h"
#include "data/formats.h"
#include "data/h5file.h"
#include "data/mapped_shard.h"
#include "data/prefetch.h"
#include "kernels/fused_downsample.h"

namespace fs = std::filesystem;

namespace mrmf::data::detail {

namespace {

// Neuron Inverter: the original's contiguous slice, preloaded and checked once.
struct NiSource : Source {
  // Samples of each rank's contiguous slice: whole batches, at least one.
  static int64_t shard_samples(const NeuronSplitInfo& in, const LoaderOptions& o, const std::string& file,
                               const std::string& dataset) {
    // Found by the kernel after the whole shard had been preloaded, naming no file.
    MRMF_CHECK_KIND(Data, in.c <= kernels::kFusedMaxChannels, file, ": dataset '", dataset, "' has C = ", in.c,
                    " channels (shape (N, T, C) = (", in.n, ", ", in.t, ", ", in.c, ")); the loaders convert at most ",
                    kernels::kFusedMaxChannels, " (is it stored (N, C, T)?)");
    const int64_t n = o.max_samples > 0 ? std::min(in.n, o.max_samples) : in.n;
    const int64_t S = n / o.world / o.batch_size * o.batch_size;
    MRMF_CHECK_KIND(Data, S > 0, file, ": dataset '", dataset, "' has ", in.n, " samples",
                    n < in.n ? " (" + std::to_string(n) + " used: data.max_train_samples)" : std::string(), "; with ",
                    o.world, " rank(s) and batch ", o.batch_size,
                    " each rank's shard floor(N / world / batch) * batch is 0 "
                    "samples, expected at least one batch");
    return S;
  }
  Tensor frames;  // [n_local, T, C] stored dtype
  NiSource(const DataSpec& spec, const LoaderOptions& o) {
    const NeuronInverterFile f = NeuronInverterFile::open(spec.path, {spec.split});
    const NeuronSplitInfo& in = f.info(spec.split);
    file = spec.path;
    dataset = NeuronInverterFile::frames_name(spec.split);
    const int64_t S = shard_samples(in, o, file, dataset);
    const int64_t begin = o.rank * S;
    try {  // the shard is preloaded whole: say which data did not fit
      frames = Tensor::empty({S, in.t, in.c}, in.dtype);
    } catch (const Error& e) {
      MRMF_THROW(Data, file, ": dataset '", dataset, "': this rank's shard of ", S, " samples (", in.t, " x ", in.c,
                 " ", dtype_name(in.dtype), ") is preloaded into memory and does not fit: ", e.message(),
                 "; use more ranks or fewer samples");
    }
    labels = Tensor::empty({S, in.p}, DType::F32);
    f.read_into(spec.split, begin, frames, labels);
    log1p = o.transform.kind == kernels::FusedTransform::Log1p;
    check_finite(frames, file + ": dataset '" + dataset + "'", begin);
    if (log1p) check_log1p_domain(frames, file + ": dataset '" + dataset + "'", begin);
    check_finite(labels, file + ": dataset '" + NeuronInverterFile::labels_name(spec.split) + "'", begin);
    dtype = in.dtype;
    channels = in.c;
    params = in.p;
    spatial = {in.t};
    axis_names = {"T"};
    if (o.ni_layout == NiLayout::Transpose) {
      raw = {in.t, in.c};
      layout = kernels::InputLayout::ChannelsLast;
    } else {  // x.view(-1, C, T): the same bytes read as C rows of T
      raw = {in.c, in.t};
      layout = kernels::InputLayout::ChannelsFirst;
    }
    for (int64_t i = 0; i < S; ++i) ids.push_back(begin + i);
    common_batches = S / o.batch_size;
  }
  const void* raw_ptr(int64_t local) const override {
    return static_cast<const char*>(frames.raw_data()) + local * raw_bytes();
  }
  void* mutable_raw_ptr(int64_t local) override { return const_cast<void*>(raw_ptr(local)); }
  void read_raw(int64_t local, void* dst) override {
    std::memcpy(dst, raw_ptr(local), static_cast<size_t>(raw_bytes()));
  }
};

}  // namespace

namespace {

// The *.h5 entries of a folder, sorted as glob() sorts them (hidden ones
// left out; a dangling link kept, so that opening it names it). Listed, not
// globbed: a folder name with '[', '*' or ',' in it is a name, not a pattern.
// The *.h5 files directly in `dir` that a loader reads (hidden names are
// not: editors' and tools' temporaries), sorted; possibly none.
std::vector<std::string> listed_h5_files(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    std::error_code de;  // (not `ec`: a dangling link's ENOENT is not a failure to list)
    if (name.empty() || name[0] == '.' || e.path().extension() != ".h5" || e.is_directory(de)) continue;
    out.push_back(e.path().string());
  }
  MRMF_CHECK_KIND(Data, !ec, "cannot list ", dir.string(), ": ", ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> h5_files_in(const fs::path& dir) {
  std::vector<std::string> out = listed_h5_files(dir);
  MRMF_CHECK_KIND(Data, !out.empty(), "no *.h5 files in ", dir.string());
  return out;
}

}  // namespace

std::vector<std::string> cosmo_folder_files(const std::string& root, std::vector<std::string>* ignored) {
  const fs::path r(root);
  std::vector<fs::path> dirs;
  for (Split s : kAllSplits)
    if (fs::is_directory(r / split_name(s))) dirs.push_back(r / split_name(s));
  if (dirs.empty()) dirs.push_back(r);
  std::vector<std::string> out;
  for (const auto& d : dirs)
    for (const auto& p : listed_h5_files(d)) out.push_back(fs::path(p).lexically_relative(r).string());
  std::sort(out.begin(), out.end());
  if (ignored) {
    ignored->clear();
    const std::set<std::string> taken(out.begin(), out.end());
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(r, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      const std::string rel = it->path().lexically_relative(r).string();
      std::error_code de;  // (not `ec`: an entry that cannot be stat'ed must not end the walk)
      if (it->path().extension() == ".h5" && !it->is_directory(de) && !taken.count(rel)) ignored->push_back(rel);
    }
    std::sort(ignored->begin(), ignored->end());
  }
  return out;
}

std::vector<std::string> cosmo_paths(const DataSpec& spec) {
  const std::string split = split_name(spec.split);
  try {
    if (fs::is_directory(spec.path)) {
      const fs::path root(spec.path), sub = root / split;
      if (fs::is_directory(sub)) return h5_files_in(sub);
      // Files directly in the folder stand for every split -- unless it has
      // split folders, where they are not this split's.
      for (Split other : kAllSplits)
        MRMF_CHECK_KIND(Data, !fs::is_directory(root / split_name(other)), "no ", split, "/ folder in ", spec.path,
                        ", which has ", split_name(other), "/: the files directly in it are not taken for the ", split,
                        " split");
      return h5_files_in(root);
    }
    return expand_file_list(spec.path);
  } catch (const Error& e) {
    // Say which split came up empty and where its files were expected.
    MRMF_THROW(Data, "CosmoFlow split '", split, "': ", e.message(),
               " (expected HDF5 files with '3Dmap' and 'unitPar' ",
               fs::is_directory(spec.path) ? "in " + (fs::path(spec.path) / split).string() + "/, or directly in " +
                                                 spec.path + "/ when it has no split folders"
                                           : std::string("matching the data path or data.") + split + "_files",
               ")");
  }
}

namespace {

// Rank assignment shared by both CosmoFlow layouts: rank r owns the
// contiguous range [r * per, (r + 1) * per) of the samples in file order,
// per = total / world. With files that divide evenly among the ranks that is
// whole files per rank (file-level shards, each read only by its owner);
// otherwise at most two files are shared with a neighbour. Either way every
// rank has the same sample count, so none drops more than the remainder of
// one batch (dealing whole files round-robin could leave ranks with shards
// a file apart: whole batches lost on the larger ones). Fills `picks` with
// (file, row, global id) and the common batch count.
struct Pick {
  size_t file;
  int64_t row, id;
};
std::vector<Pick> cosmo_shard(const std::vector<int64_t>& per_file, const LoaderOptions& o, const std::string& what,
                              int64_t& common_batches) {
  const size_t F = per_file.size();
  std::vector<int64_t> first(F + 1, 0);
  for (size_t f = 0; f < F; ++f) first[f + 1] = first[f] + per_file[f];
  const int64_t total = o.max_samples > 0 ? std::min(first[F], o.max_samples) : first[F];
  const int64_t per = total / o.world;
  common_batches = per / o.batch_size;
  MRMF_CHECK_KIND(Data, common_batches > 0, what, ": ", total, " samples",
                  total < first[F] ? " (data.max_train_samples)" : "", " in ", F, " file(s) shared by ", o.world,
                  " rank(s) give a shard of ", per, " samples, smaller than one batch of ", o.batch_size);
  std::vector<Pick> picks;
  for (int64_t g = o.rank * per; g < (o.rank + 1) * per; ++g) {
    const size_t f = static_cast<size_t>(std::upper_bound(first.begin(), first.end(), g) - first.begin() - 1);
    picks.push_back({f, g - first[f], g});
  }
  return picks;
}

// A CosmoFlow source over a shard of files (`picks`), each file's dataset
// read through HDF5 or mapped (LoaderOptions::memory_map). Mapped, raw_ptr()
// serves every sample from the mapping, and a sample whose type needs a
// value check (check_values: float types; signed ones under log1p) is
// checked the first time a batch reads it (check_ram_sample), not every
// epoch: the files do not change while mapped. Mapped in chunks to decode
// or put together (MappedShard::packed: compressed, or split), raw_ptr()
// serves none: read_raw() decodes a sample, on any thread
// (decodes_in_ram()), and checks it every time.
struct MappedSource : Source {
  std::vector<Pick> picks;
  MappedShard mapped_;            // the shard's files, when mapped
  std::vector<uint8_t> checked_;  // per sample, mapped only: its values were checked
  // "<file>: dataset '<name>' ..." for sample `local`'s messages.
  virtual std::string sample_what(int64_t local) const = 0;
  // Keeps the mapping `m` if the shard's first sample of each way of
  // reading it -- in place; in a chunk or split over several; compressed or
  // not; first in chunks it shares with other samples or not -- reads the
  // same through it as through HDF5 (the offsets' and the decoding's
  // meaning checked once each: a shard may mix files of all).
  void adopt(MappedShard m, const std::vector<std::string>& paths, int64_t rows_per_sample) {
    if (m.empty()) return;
    std::set<int> seen;
    for (const Pick& q : picks) {
      const MappedSample& s = m.sample(q.file, q.row);
      // decode_chunk() or decode_unit(), and in the latter a sample at its
      // chunks' start or inside them.
      const ChunkGrid& g = m.grids[q.file];
      const int way =
          !s.packed ? 0
                    : 1 + (s.skipped == kNoFilterApplied) + 2 * !g.unit.empty() + 4 * (q.row % g.units_per_chunk != 0);
      if (seen.insert(way).second &&
          !mapping_agrees(paths[q.file], dataset, m, q.file, q.row, rows_per_sample, dtype, raw_bytes()))
        return;
    }
    if (m.packed)
      log::debug("{}: '{}' decoded or put together from its chunks by the loader's threads", paths[picks[0].file],
                 dataset);
    for (const Pick& q : picks)  // compressed chunks of several samples: what they cost, once
      if (m.grids[q.file].units_per_chunk > 1 && m.sample(q.file, q.row).skipped != kNoFilterApplied) {
        log::info("{}", shared_chunks_notice(paths[q.file], dataset, m.grids[q.file]));
        break;
      }
    mapped_ = std::move(m);
    checked_.assign(picks.size(), needs_value_check() ? 0 : 1);
  }
  const MappedSample& mapped_sample(int64_t local) const {
    const Pick& p = picks[static_cast<size_t>(local)];
    return mapped_.sample(p.file, p.row);
  }
  const void* raw_ptr(int64_t local) const override {
    if (mapped_.empty() || mapped_.packed) return nullptr;
    return mapped_sample(local).p;
  }
  bool decodes_in_ram() const override { return !mapped_.empty() && mapped_.packed; }
  void check_ram_sample(int64_t local) override {
    if (!raw_ptr(local) || checked_[static_cast<size_t>(local)]) return;
    check_values(raw_ptr(local), 1, sample_what(local));
    checked_[static_cast<size_t>(local)] = 1;
  }
  // A mapped sample into dst, checked; false when the shard is not mapped.
  bool copy_mapped(int64_t local, void* dst) {
    if (mapped_.empty()) return false;
    if (!mapped_.packed) {
      check_ram_sample(local);
      std::memcpy(dst, raw_ptr(local), static_cast<size_t>(raw_bytes()));
      return true;
    }
    const std::string what = sample_what(local);
    const Pick& p = picks[static_cast<size_t>(local)];
    read_mapped(mapped_, p.file, p.row, raw_bytes(), dtype, dst, what);
    check_values(dst, 1, what);
    return true;
  }
};

// CosmoFlow, authors' layout: `3Dmap` (n, D, H, W, 4), streamed one sample
// at a time, or mapped.
struct CosmoSource : MappedSource {
  CosmoFlowFiles cf;
  std::map<size_t, H5File> open_;  // read_raw()'s, under hdf5_mutex
  CosmoSource(const DataSpec& spec, const LoaderOptions& o) : cf(CosmoFlowFiles::open(cosmo_paths(spec))) {
    log1p = o.transform.kind == kernels::FusedTransform::Log1p;
    file = cf.path(0);
    dataset = "3Dmap";
    std::vector<int64_t> per_file;
    for (size_t f = 0; f < cf.num_files(); ++f) per_file.push_back(cf.samples(f));
    picks = cosmo_shard(per_file, o, spec.path + " (" + split_name(spec.split) + ")", common_batches);
    const auto d = cf.dims();
    dtype = cf.dtype();
    channels = cf.channels();
    params = cf.params();
    raw = {d[0], d[1], d[2], channels};
    spatial = {d[0], d[1], d[2]};
    axis_names = {"D (x)", "H (y)", "W (z)"};
    layout = kernels::InputLayout::ChannelsLast;
    labels = Tensor::empty({static_cast<int64_t>(picks.size()), params}, DType::F32);
    // Each file of the shard opened once: its labels and, for mapping,
    // where its `3Dmap` lies.
    std::map<size_t, Tensor> file_labels;
    std::vector<MapRequest> want;
    for (size_t i = 0; i < picks.size(); ++i) {
      const size_t f = picks[i].file;
      if (!file_labels.count(f)) {
        const H5File h = H5File::open_read(cf.path(f));
        file_labels[f] = h.read("unitPar", DType::F32);
        check_finite(file_labels[f], cf.path(f) + ": dataset 'unitPar'");
        if (o.memory_map) want.push_back(map_request(h, f, "3Dmap", dtype, 1));
      }
      std::memcpy(labels.data<float>() + static_cast<int64_t>(i) * params,
                  file_labels[f].data<float>() + picks[i].row * params, static_cast<size_t>(params) * 4);
      ids.push_back(picks[i].id);
    }
    if (!o.memory_map) return;
    std::vector<std::string> paths;
    for (size_t f = 0; f < cf.num_files(); ++f) paths.push_back(cf.path(f));
    adopt(map_shard(paths, want, dataset, raw_bytes()), paths, 1);
  }
  std::string sample_what(int64_t local) const override {
    const Pick& p = picks[static_cast<size_t>(local)];
    return cf.path(p.file) + ": dataset '3Dmap' sample " + std::to_string(p.row);
  }
  void read_raw(int64_t local, void* dst) override {
    if (copy_mapped(local, dst)) return;
    {
      std::lock_guard<std::recursive_mutex> h(hdf5_mutex());
      const Pick& p = picks[static_cast<size_t>(local)];
      auto it = open_.find(p.file);
      if (it == open_.end()) {
        if (open_.size() >= 32) open_.clear();  // bound the open handles
        it = open_.emplace(p.file, H5File::open_read(cf.path(p.file))).first;
      }
      it->second.read_rows_into("3Dmap", p.row, 1, dtype, dst);
    }
    check_values(dst, 1, sample_what(local));
  }
};

// CosmoFlow, LBANN layout: one sample per file, `full` (4, D, H, W), read
// through HDF5 or mapped.
struct LbannSource : MappedSource {
  CosmoFlowLbannFiles lf;
  std::vector<std::string> paths;
  LbannSource(const DataSpec& spec, const LoaderOptions& o)
      : lf(CosmoFlowLbannFiles::open(cosmo_paths(spec))), paths(cosmo_paths(spec)) {
    log1p = o.transform.kind == kernels::FusedTransform::Log1p;
    file = paths[0];
    dataset = "full";
    picks = cosmo_shard(std::vector<int64_t>(paths.size(), 1), o, spec.path + " (" + split_name(spec.split) + ")",
                        common_batches);
    const auto d = lf.dims();
    dtype = lf.dtype();
    channels = 4;
    params = 4;
    raw = {4, d[0], d[1], d[2]};
    spatial = {d[0], d[1], d[2]};
    axis_names = {"D (x)", "H (y)", "W (z)"};
    layout = kernels::InputLayout::ChannelsFirst;
    labels = Tensor::empty({static_cast<int64_t>(picks.size()), params}, DType::F32);
    std::vector<MapRequest> want;
    for (size_t i = 0; i < picks.size(); ++i) {
      const size_t f = picks[i].file;
      const H5File h = H5File::open_read(paths[f]);
      const Tensor l = h.read("unitPar", DType::F32);
      check_finite(l, paths[f] + ": dataset 'unitPar'");
      std::memcpy(labels.data<float>() + static_cast<int64_t>(i) * 4, l.data<float>(), 16);
      ids.push_back(picks[i].id);
      if (o.memory_map) want.push_back(map_request(h, f, "full", dtype, 4));  // a sample: 4 rows
    }
    if (o.memory_map) adopt(map_shard(paths, want, dataset, raw_bytes()), paths, 4);  // a sample: `full`'s 4 rows
  }
  std::string sample_what(int64_t local) const override {
    return paths[picks[static_cast<size_t>(local)].file] + ": dataset 'full'";
  }
  void read_raw(int64_t local, void* dst) override {
    if (copy_mapped(local, dst)) return;
    {
      std::lock_guard<std::recursive_mutex> h(hdf5_mutex());
      H5File::open_read(paths[picks[static_cast<size_t>(local)].file]).read_rows_into("full", 0, 4, dtype, dst);
    }
    check_values(dst, 1, sample_what(local));
  }
};

}  // namespace

void check_source(const DataSpec& spec, const LoaderOptions& o) {
  const std::string what = spec.path + " (" + split_name(spec.split) + ")";
  int64_t batches = 0;
  switch (spec.format) {
    case DataFormat::NeuronInverter: {
      const NeuronInverterFile f = NeuronInverterFile::open(spec.path, {spec.split});
      NiSource::shard_samples(f.info(spec.split), o, spec.path, NeuronInverterFile::frames_name(spec.split));
      return;
    }
    case DataFormat::CosmoFlow: {
      const CosmoFlowFiles cf = CosmoFlowFiles::open(cosmo_paths(spec));
      std::vector<int64_t> per_file;
      for (size_t f = 0; f < cf.num_files(); ++f) per_file.push_back(cf.samples(f));
      cosmo_shard(per_file, o, what, batches);
      return;
    }
    case DataFormat::CosmoFlowLbann:  // one sample per file: the files are opened when read
      cosmo_shard(std::vector<int64_t>(cosmo_paths(spec).size(), 1), o, what, batches);
      return;
  }
  MRMF_THROW(Usage, "unknown data format");
}

void Source::check_values(const void* p, int64_t n, const std::string& what) const {
  if (!needs_value_check()) return;
  std::vector<int64_t> sh{n};
  sh.insert(sh.end(), raw.begin(), raw.end());
  const Tensor t = Tensor::from_blob(const_cast<void*>(p), Shape(sh), dtype);
  check_finite(t, what);
  if (log1p) check_log1p_domain(t, what);
}

std::unique_ptr<Source> open_source(const DataSpec& spec, const LoaderOptions& o) {
  switch (spec.format) {
    case DataFormat::NeuronInverter: return std::make_unique<NiSource>(spec, o);
    case DataFormat::CosmoFlow: return std::make_unique<CosmoSource>(spec, o);
    case DataFormat::CosmoFlowLbann: return std::make_unique<LbannSource>(spec, o);
  }
  MRMF_THROW(Usage, "unknown data format");
}

}  // namespace mrmf::data::detail
