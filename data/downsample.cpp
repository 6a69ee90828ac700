// Offline resolution reducer; see data/downsample.h.
#include "data/downsample.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/log.h"
#include "core/output_paths.h"
#include "data/formats.h"
#include "data/h5file.h"
#include "data/loader_sources.h"

namespace fs = std::filesystem;

namespace mrmf::data {
namespace {

// Rows per streamed block: as many as fit in max_block_bytes (at least one).
int64_t rows_per_block(int64_t row_bytes, const DownsampleOptions& o) {
  return std::max<int64_t>(1, o.max_block_bytes / std::max<int64_t>(1, row_bytes));
}

void check_divides(const std::string& file, const std::string& dataset, const char* axis, int64_t len,
                   int64_t factor) {
  // Usage (exit 2): the flag does not fit the data, the data are fine.
  MRMF_CHECK_KIND(Usage, factor >= 1 && len % factor == 0 && len / factor >= 1, file, ": dataset '", dataset,
                  "' axis ", axis, " has length ", len, ", not divisible by the factor ", factor);
}

std::string describe(const std::string& in, const std::string& axes, int64_t factor) {
  std::ostringstream os;
  os << "block mean along " << axes;
  if (factor > 1) os << " by " << factor;
  os << " of " << in;
  return os.str();
}

}  // namespace

Tensor average_blocks_channels_last(const Tensor& x, const std::vector<int64_t>& factors) {
  const int k = x.ndim() - 2;
  MRMF_CHECK(x.dtype() == DType::F32 && x.is_contiguous() && !x.device().is_cuda() && k >= 1 && k <= 3 &&
                 static_cast<int>(factors.size()) == k,
             "average_blocks_channels_last: expected a contiguous float32 CPU [N, s..., C] and one factor per "
             "spatial axis, got ",
             x.str(), " and ", factors.size(), " factor(s)");
  int64_t in[3] = {1, 1, 1}, f[3] = {1, 1, 1}, out[3];
  for (int d = 0; d < k; ++d) {
    in[3 - k + d] = x.size(1 + d);
    f[3 - k + d] = factors[static_cast<size_t>(d)];
    MRMF_CHECK_KIND(Shape, f[3 - k + d] >= 1 && in[3 - k + d] % f[3 - k + d] == 0, "spatial axis ", d,
                    " has length ", in[3 - k + d], ", not divisible by the factor ", f[3 - k + d]);
  }
  for (int d = 0; d < 3; ++d) out[d] = in[d] / f[d];
  const int64_t N = x.size(0), C = x.size(-1);
  std::vector<int64_t> od{N};
  for (int d = 3 - k; d < 3; ++d) od.push_back(out[d]);
  od.push_back(C);
  Tensor y = Tensor::empty(Shape(od), DType::F32);
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const float inv = 1.f / static_cast<float>(f[0] * f[1] * f[2]);
  const int64_t planes = N * out[0] * out[1];
  // Sums each block in (a, b, z) order then scales: the same order as the
  // fused kernel, so the two agree bit-for-bit without a transform.
#pragma omp parallel for schedule(static) if (x.numel() >= (1 << 16))
  for (int64_t p = 0; p < planes; ++p) {
    const int64_t n = p / (out[0] * out[1]), o0 = (p / out[1]) % out[0], o1 = p % out[1];
    for (int64_t o2 = 0; o2 < out[2]; ++o2)
      for (int64_t c = 0; c < C; ++c) {
        float acc = 0.f;
        for (int64_t a = 0; a < f[0]; ++a)
          for (int64_t b = 0; b < f[1]; ++b)
            for (int64_t z = 0; z < f[2]; ++z)
              acc += xp[(((n * in[0] + o0 * f[0] + a) * in[1] + o1 * f[1] + b) * in[2] + o2 * f[2] + z) * C + c];
        yp[(((n * out[0] + o0) * out[1] + o1) * out[2] + o2) * C + c] = acc * inv;
      }
  }
  return y;
}

namespace {
// The block means of finite input, refused where a block's float32 sum
// overflowed (values near 3.4e38: the mean of finite values would be
// written as inf). `what` names the input, `first_row` its first sample.
Tensor checked_block_means(const Tensor& x, const std::vector<int64_t>& factors, const std::string& what,
                           int64_t first_row = 0) {
  Tensor y = average_blocks_channels_last(x, factors);
  check_finite(y, "the coarse copy of " + what + " (a block's float32 sum overflows: its values are near 3.4e38)",
               first_row);
  return y;
}

// The original's meta.JSON for the coarse copy: where it is a JSON object
// whose time_bins (a generator's, as mrmf datagen writes) describe the
// frames, those become the coarse copy's (and a bin spans k times the
// integration steps); any other text is kept as it is.
std::string coarse_meta(const std::string& text, int64_t k) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("time_bins") || !j["time_bins"].is_number_integer()) return text;
  j["time_bins"] = j["time_bins"].get<int64_t>() / k;
  if (j.contains("steps_per_bin") && j["steps_per_bin"].is_number_integer())
    j["steps_per_bin"] = j["steps_per_bin"].get<int64_t>() * k;
  j["downsampled"] = {{"axes", "t"}, {"factor", k}};
  return j.dump();
}
}  // namespace

DownsampleSummary downsample_neuron_file(const std::string& in, const std::string& out, int64_t k,
                                         const DownsampleOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  MRMF_CHECK_KIND(Usage, k >= 1, "factor must be >= 1, got ", k);
  MRMF_CHECK_KIND(Usage, !same_file(in, out), "--out must differ from --in (", in, " and ", out,
                  " are the same file)");
  for (const auto& behind : files_behind(in))  // --force replaced the data behind an external link
    MRMF_CHECK_KIND(Usage, !same_file(behind, out), "--out ", out, " is ", behind, ", which --in ", in,
                    " reads through an HDF5 link or external storage; writing it would destroy the input");
  refuse_existing_output(out, opts.force);
  // Every split the file has (a file of only val/test frames is coarsened too).
  const NeuronInverterFile src = NeuronInverterFile::open(in, {});
  int64_t total = 0;
  for (Split s : kAllSplits)
    if (src.has(s)) {
      check_divides(in, NeuronInverterFile::frames_name(s), "T", src.info(s).t, k);
      total += src.info(s).n;
    }
  MRMF_CHECK_KIND(Data, total > 0, in, ": no split found (expected {train,val,test}_frames and _unitStar_par)");
  // Read before the splits are: a meta.JSON of another type failed only
  // after every split had been coarsened.
  const std::optional<std::string> meta = src.meta_json();
  if (opts.ranks > 1) opts.barrier();
  if (opts.rank != 0) return DownsampleSummary{};  // one output file: rank 0 writes it
  if (!fs::path(out).parent_path().empty()) fs::create_directories(fs::path(out).parent_path());
  DownsampleSummary sum;
  {
    AtomicOutput atomic(out);
    H5File w = H5File::create(atomic.temp_path());
    int64_t done = 0;
    for (Split s : kAllSplits) {
      if (!src.has(s)) continue;
      const NeuronSplitInfo& info = src.info(s);
      const std::string fn = NeuronInverterFile::frames_name(s), ln = NeuronInverterFile::labels_name(s);
      w.create_dataset(fn, {info.n, info.t / k, info.c}, DType::F32);
      w.create_dataset(ln, {info.n, info.p}, DType::F32);
      const int64_t rows = rows_per_block(info.t * info.c * 4, opts);
      Tensor frames = Tensor::empty({std::min(rows, info.n), info.t, info.c}, DType::F32);
      Tensor labels = Tensor::empty({std::min(rows, info.n), info.p}, DType::F32);
      for (int64_t r = 0; r < info.n; r += rows) {
        const int64_t cnt = std::min(rows, info.n - r);
        Tensor fr = frames.narrow(0, 0, cnt), lb = labels.narrow(0, 0, cnt);
        src.read_into(s, r, fr, lb);  // HDF5 converts float16 to float32
        // A coarse copy of bad data is bad data: refuse it here, naming the row.
        check_finite(fr, in + ": dataset '" + fn + "'", r);
        check_finite(lb, in + ": dataset '" + ln + "'", r);
        w.write_rows(fn, r, checked_block_means(fr, {k}, in + ": dataset '" + fn + "'", r));
        w.write_rows(ln, r, lb);
        done += cnt;
        sum.bytes_in += cnt * info.t * info.c * static_cast<int64_t>(dtype_size(info.dtype));
        sum.bytes_out += cnt * (info.t / k) * info.c * 4;
        if (opts.progress) opts.progress(done, total);
      }
    }
    if (meta) w.write_string("meta.JSON", coarse_meta(*meta, k), true);
    w.write_string_attribute("/", "mrmf_downsample", describe(in, "t", k));
    w.close();
    atomic.commit();
  }
  sum.files = 1;
  sum.samples = total;
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

namespace {
// The root attribute naming where a coarse cube file came from and how.
void write_cube_provenance(H5File& o, const std::string& in_path, const std::array<int64_t, 3>& f) {
  std::ostringstream axes;
  axes << "(D, H, W) with factors (" << f[0] << ", " << f[1] << ", " << f[2] << ")";
  o.write_string_attribute("/", "mrmf_downsample", describe(in_path, axes.str(), 1));
}

// One LBANN sample file: `full` (4, D, H, W) -> float32 (4, D', H', W'), each
// channel averaged over f0 x f1 x f2 blocks; `unitPar` copied.
// Written under a temporary name; committed by the caller with the others.
void downsample_lbann_file(const std::string& in_path, AtomicOutput& atomic, const std::array<int64_t, 3>& f,
                           DownsampleSummary& sum) {
  const Batch b = CosmoFlowLbannFiles::open(std::vector<std::string>{in_path}).read(0);
  const Tensor x = to_float32(b.frames);  // [4, D, H, W]
  check_finite(x, in_path + ": dataset 'full'");
  check_finite(b.labels, in_path + ": dataset 'unitPar'");
  const int64_t C = x.size(0), D = x.size(1), H = x.size(2), W = x.size(3);
  // Channels as the batch axis of a one-channel channels-last average.
  const Tensor y = checked_block_means(x.view({C, D, H, W, 1}), {f[0], f[1], f[2]}, in_path + ": dataset 'full'");
  {
    H5File o = H5File::create(atomic.temp_path());
    o.write("full", y.view({C, D / f[0], H / f[1], W / f[2]}));
    o.write("unitPar", b.labels.view({b.labels.numel()}));
    write_cube_provenance(o, in_path, f);
    o.close();
  }
  ++sum.files;
  sum.bytes_in += x.numel() * static_cast<int64_t>(dtype_size(b.frames.dtype()));
  sum.bytes_out += y.numel() * 4;
}
}  // namespace

DownsampleSummary downsample_cosmoflow_dir(const std::string& in_dir, const std::string& out_dir,
                                           const std::array<int64_t, 3>& f, const DownsampleOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  MRMF_CHECK_KIND(Data, fs::is_directory(in_dir), in_dir, ": not a directory (expected a CosmoFlow folder)");
  const fs::path inp = fs::absolute(in_dir).lexically_normal(), outp = fs::absolute(out_dir).lexically_normal();
  MRMF_CHECK_KIND(Usage, !same_file(in_dir, out_dir), "--out must differ from --in (", in_dir, " and ", out_dir,
                  " are the same folder)");
  // Nested folders would mix inputs and outputs: an output inside the input
  // (say --out cf/train) hides or re-reads input files, an input inside the
  // output is overwritten in place.
  const auto inside = [](const fs::path& a, const fs::path& b) {  // a strictly below b
    const std::string as = a.string(), bs = b.string();
    return as.size() > bs.size() && as.compare(0, bs.size(), bs) == 0 && (bs.back() == '/' || as[bs.size()] == '/');
  };
  const fs::path inr = fs::weakly_canonical(inp), outr = fs::weakly_canonical(outp);
  MRMF_CHECK_KIND(Usage, !inside(outr, inr) && !inside(inr, outr), "--out ", out_dir, " and --in ", in_dir,
                  " must not lie one inside the other (write the coarse copy beside the input folder)");
  // The files a loader reads (train/, val/, test/, or the folder itself),
  // sorted. Every *.h5 below the folder used to be copied: a subfolder of
  // link targets, of older runs' files, was refused or copied for nothing.
  std::vector<std::string> ignored;
  std::vector<fs::path> rel;
  for (const auto& r : detail::cosmo_folder_files(inp.string(), &ignored)) {
    const fs::path p = inp / r;
    std::error_code le;
    // A dangling link was skipped without a word (the copy then lacked a
    // file the loader, which names it, would have refused).
    MRMF_CHECK_KIND(Data, !(fs::is_symlink(p, le) && !fs::exists(p, le)), p.string(), " is a link to ",
                    fs::read_symlink(p, le).string(), ", which does not exist");
    MRMF_CHECK_KIND(Data, fs::is_regular_file(p, le), p.string(),
                    " is not a regular file (a FIFO, socket or "
                    "device), expected a CosmoFlow HDF5 file");
    rel.push_back(r);
  }
  if (!ignored.empty())
    log::info(
        "downsample: {} .h5 file(s) under {} are read by no split ({}{}): not copied. A CosmoFlow folder's splits "
        "are train/, val/ and test/, or the files directly in it when it has none of these",
        ignored.size(), in_dir, ignored[0], ignored.size() > 1 ? ", ..." : "");
  for (const auto& r : rel)  // files read through HDF5 links: --force would remove or replace them
    for (const auto& behind : files_behind((inp / r).string()))
      MRMF_CHECK_KIND(Usage, !same_file(behind, out_dir) && !inside(fs::weakly_canonical(behind), outr), "--out ",
                      out_dir, " holds ", behind, ", which ", (inp / r).string(),
                      " reads through an HDF5 link or external storage; writing there would destroy the input");
  MRMF_CHECK_KIND(Data, !rel.empty(), in_dir,
                  ": no .h5 files found (expected CosmoFlow files with '3Dmap', or LBANN ones with 'full')");
  // Validate everything before writing anything. A folder holds either
  // layout: the authors' files ('3Dmap', many samples each) or LBANN's (one
  // sample per file, 'full' channels-first).
  std::vector<CosmoFlowFiles> srcs;
  std::vector<bool> lbann(rel.size(), false);
  const char* names[3] = {"D (x)", "H (y)", "W (z)"};
  // Every file must agree with the first in layout and cube size: the
  // loader refuses a split whose files differ, and the train and val splits
  // must agree, so a mixed folder made a copy that nothing could read.
  std::array<int64_t, 3> dims0{};
  const std::string first = (inp / rel[0]).string();
  for (size_t i = 0; i < rel.size(); ++i) {
    const std::string p = (inp / rel[i]).string();
    {
      const H5File h = H5File::open_read(p);
      lbann[i] = !h.exists("3Dmap") && h.exists("full");  // the loader's rule: '3Dmap' where a file has both
    }
    const char* ds = lbann[i] ? "full" : "3Dmap";
    std::array<int64_t, 3> dims{};
    if (lbann[i]) {
      dims = CosmoFlowLbannFiles::open(std::vector<std::string>{p}).dims();
      srcs.emplace_back();
    } else {
      srcs.push_back(CosmoFlowFiles::open(std::vector<std::string>{p}));
      dims = srcs.back().dims();
    }
    if (i == 0) dims0 = dims;
    MRMF_CHECK_KIND(Data, lbann[i] == lbann[0], p,
                    lbann[i] ? " holds LBANN's layout ('full')" : " holds the authors' layout ('3Dmap')", " but ",
                    first, lbann[0] ? " LBANN's ('full')" : " the authors' ('3Dmap')",
                    "; expected every file of a CosmoFlow folder in one layout");
    MRMF_CHECK_KIND(Data, dims == dims0, p, ": dataset '", ds, "' has (D, H, W) = (", dims[0], ", ", dims[1], ", ",
                    dims[2], ") but ", first, " has (", dims0[0], ", ", dims0[1], ", ", dims0[2],
                    "); expected every file of a CosmoFlow folder to agree (its splits are read by one model)");
    for (int d = 0; d < 3; ++d) check_divides(p, ds, names[d], dims[static_cast<size_t>(d)], f[static_cast<size_t>(d)]);
    // Split folders linked into each other's tree (in/train -> ../out/train,
    // out/test -> ../in/test): the folders' own check compares the roots
    // only, and --force replaced the input files with their coarse copies.
    {
      const fs::path out_file = outp / rel[i];
      std::error_code e1, e2;
      const fs::path in_real = fs::weakly_canonical(p, e1), out_real = fs::weakly_canonical(out_file.parent_path(), e2);
      MRMF_CHECK_KIND(Usage,
                      !same_file(p, out_file.string()) && !(!e1 && (in_real == outr || inside(in_real, outr))) &&
                          !(!e2 && (out_real == inr || inside(out_real, inr))),
                      "--out ", out_dir, ": ", out_file.string(), " and the input ", p,
                      " lie in one folder through a link (a linked split folder); writing there would destroy the "
                      "input. Write the coarse copy to a folder that shares no split folder with the input");
    }
    refuse_existing_output((outp / rel[i]).string(), opts.force);
  }
  // .h5 files already in --out that this input has no counterpart of (an
  // earlier, larger data set's): the loader reads every file of a split
  // folder, so they would train with the new ones. Refused, or with --force
  // removed once the new files are in place.
  std::vector<fs::path> others;
  {
    // What a loader reads from --out once the new files are in: its split
    // folders where it has any (the new files then go into them), else the
    // files directly in it. (Listing only the folders the new files go to
    // missed a stale test/ beside new train/ and val/; paths are compared
    // as written: fs::relative resolved a linked split folder, and --force
    // removed the files it had just written.)
    std::error_code ec;
    const bool in_splits = std::any_of(rel.begin(), rel.end(), [](const fs::path& r) { return r.has_parent_path(); });
    bool out_splits = false;
    for (Split sp : kAllSplits) out_splits = out_splits || fs::is_directory(outp / split_name(sp), ec);
    MRMF_CHECK_KIND(Usage, in_splits || !out_splits, "--out ", out_dir,
                    " has split folders (train/, val/ or test/): "
                    "a loader would read those, not the new files written directly in it; choose another --out");
    if (in_splits == out_splits && fs::is_directory(outp, ec)) {
      const std::set<fs::path> ours(rel.begin(), rel.end());
      for (const auto& r : detail::cosmo_folder_files(outp.string()))
        if (!ours.count(fs::path(r))) {
          // --force removes these: never an input file through a linked folder.
          const fs::path real = fs::weakly_canonical(outp / r, ec);
          MRMF_CHECK_KIND(Usage, ec || !(real == inr || inside(real, inr)), "--out ", out_dir, ": ",
                          (outp / r).string(), " is the input's ", real.string(),
                          " through a link, and a loader would read it with the new files; choose another --out");
          others.push_back(outp / r);
        }
    }
    std::sort(others.begin(), others.end());
    MRMF_CHECK_KIND(Usage, others.empty() || opts.force, out_dir, " already holds ", others.size(),
                    " .h5 file(s) that ", in_dir, " has no counterpart of (",
                    others.empty() ? std::string() : others[0].lexically_relative(outp).string(),
                    others.size() > 1 ? ", ..." : "",
                    "); a loader would read them together with the new files. --force removes them, or choose "
                    "another --out");
  }
  if (opts.ranks > 1) opts.barrier();
  DownsampleSummary sum;
  int64_t done = 0, mine = 0;
  for (size_t i = 0; i < rel.size(); ++i)
    if (static_cast<int64_t>(i) % opts.ranks == opts.rank) mine += lbann[i] ? 1 : srcs[i].total();
  // Every file is written under a temporary name and renamed into place only
  // when all of them (on every rank) are written: a failure part-way (a NaN
  // in a later file, a full disk) leaves the output folder as it was, not a
  // mix of new and old files.
  std::vector<std::unique_ptr<AtomicOutput>> pending;
  for (size_t i = 0; i < rel.size(); ++i) {
    if (static_cast<int64_t>(i) % opts.ranks != opts.rank) continue;
    const std::string out_path = (outp / rel[i]).string();
    std::error_code ec;  // ranks create the same folders at the same time
    fs::create_directories(fs::path(out_path).parent_path(), ec);
    pending.push_back(std::make_unique<AtomicOutput>(out_path));
    AtomicOutput& atomic = *pending.back();
    if (lbann[i]) {
      downsample_lbann_file((inp / rel[i]).string(), atomic, f, sum);
      if (opts.progress) opts.progress(++done, mine);
      continue;
    }
    const CosmoFlowFiles& src = srcs[i];
    const auto dims = src.dims();
    const int64_t C = src.channels(), n = src.total();
    const std::string in_path = src.path(0);
    const H5File h = H5File::open_read(in_path);
    H5File o = H5File::create(atomic.temp_path());
    const int64_t od[3] = {dims[0] / f[0], dims[1] / f[1], dims[2] / f[2]};
    o.create_dataset("3Dmap", {n, od[0], od[1], od[2], C}, DType::F32);
    const int64_t rows = rows_per_block(dims[0] * dims[1] * dims[2] * C * 4, opts);
    for (int64_t r = 0; r < n; r += rows) {
      const int64_t cnt = std::min(rows, n - r);
      Tensor x = Tensor::empty({cnt, dims[0], dims[1], dims[2], C}, DType::F32);
      h.read_rows_into("3Dmap", r, cnt, DType::F32, x.raw_data());  // HDF5 converts the integer counts
      check_finite(x, in_path + ": dataset '3Dmap'", r);            // r: the block's first sample
      o.write_rows("3Dmap", r, checked_block_means(x, {f[0], f[1], f[2]}, in_path + ": dataset '3Dmap'", r));
      done += cnt;
      sum.bytes_in += x.numel() * static_cast<int64_t>(dtype_size(src.dtype()));
      sum.bytes_out += cnt * od[0] * od[1] * od[2] * C * 4;
      if (opts.progress) opts.progress(done, mine);
    }
    const Tensor labels = h.read("unitPar", DType::F32);
    check_finite(labels, in_path + ": dataset 'unitPar'");
    o.write("unitPar", labels);
    write_cube_provenance(o, in_path, f);
    o.close();
    ++sum.files;
  }
  if (opts.ranks > 1) opts.barrier();  // a rank that failed never gets here (its error aborts the job)
  for (auto& a : pending) a->commit();
  if (opts.rank == 0) {
    // A split folder that held only others' files (an earlier data set's
    // test/) goes too: an empty one fails that split's loader.
    std::error_code ec;
    for (const auto& p : others) {
      fs::remove(p);
      if (p.parent_path() != outp && fs::is_empty(p.parent_path(), ec)) fs::remove(p.parent_path(), ec);
    }
  }
  sum.samples = mine;
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

DownsampleSummary downsample_dataset(const std::string& in, const std::string& out, const DownsampleOptions& opts) {
  MRMF_CHECK_KIND(Usage, opts.factor >= 1, "--factor must be >= 1, got ", opts.factor);
  MRMF_CHECK(opts.ranks >= 1 && opts.rank >= 0 && opts.rank < opts.ranks && (opts.ranks == 1 || opts.barrier),
             "downsample: rank ", opts.rank, " of ", opts.ranks, opts.barrier ? "" : " without a barrier");
  std::vector<std::string> axes;
  {
    std::stringstream ss(opts.axes);
    std::string a;
    // getline drops a trailing empty field: "x,y,z," passed as x,y,z.
    MRMF_CHECK_KIND(Usage, opts.axes.empty() || opts.axes.back() != ',', "--axes ", opts.axes,
                    ": an empty axis name after the last comma (expected t, or a comma list of x, y, z)");
    while (std::getline(ss, a, ',')) {
      MRMF_CHECK_KIND(Usage, !a.empty(), "--axes ", opts.axes, ": an empty axis name (expected t, or a comma list "
                      "of x, y, z)");
      MRMF_CHECK_KIND(Usage, a == "t" || a == "x" || a == "y" || a == "z", "--axes: unknown axis '", a,
                      "' (expected t, or a comma list of x, y, z)");
      MRMF_CHECK_KIND(Usage, std::find(axes.begin(), axes.end(), a) == axes.end(), "--axes: axis '", a,
                      "' given twice");
      axes.push_back(a);
    }
  }
  MRMF_CHECK_KIND(Usage, !axes.empty(), "--axes: no axis given (expected t, or a comma list of x, y, z)");
  MRMF_CHECK_KIND(Data, fs::exists(in), in, ": no such file or directory");
  if (!fs::is_directory(in)) {
    bool cosmo_file = false;  // one CosmoFlow file where its folder is expected
    try {
      const H5File h = H5File::open_read(in);
      cosmo_file = h.exists("3Dmap") || h.exists("full");
    } catch (const Error&) {
      // not an HDF5 file we can open: the Neuron Inverter reader names the problem
    }
    MRMF_CHECK_KIND(Usage, !cosmo_file, "--in ", in, " is one CosmoFlow file; give the folder of the data set (its "
                    "train/val/test folders, or the *.h5 files directly in it)");
    MRMF_CHECK_KIND(Usage, axes.size() == 1 && axes[0] == "t", "--axes ", opts.axes, ": ", in,
                    " is a Neuron Inverter file, whose only reducible axis is t");
    return downsample_neuron_file(in, out, opts.factor, opts);
  }
  std::array<int64_t, 3> f{1, 1, 1};
  for (const auto& a : axes) {
    MRMF_CHECK_KIND(Usage, a != "t", "--axes t: ", in, " is a CosmoFlow folder, whose axes are x, y, z");
    f[static_cast<size_t>(a[0] - 'x')] = opts.factor;
  }
  return downsample_cosmoflow_dir(in, out, f, opts);
}

}  // namespace mrmf::data
