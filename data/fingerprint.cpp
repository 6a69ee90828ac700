// A data set's fingerprint (data/loader.h): sizes and shapes from the files'
// metadata plus a hash of the first labels, which a data set regenerated
// with another seed, or replaced by another, does not share. Cheap on
// purpose (no frames are read): it is taken at every experiment start.
#include <algorithm>
#include <cstdio>
#include <mutex>
#include <vector>

#include "data/formats.h"
#include "data/h5file.h"
#include "data/loader.h"
#include "data/loader_sources.h"
#include "data/prefetch.h"

namespace mrmf::data {
namespace {
constexpr int64_t kLabelRows = 256;  // labels hashed per data set

struct Fnv1a {
  uint64_t h = 1469598103934665603ull;
  void add(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
  std::string hex() const {
    char s[17];
    std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(h));
    return s;
  }
};

std::string dims_text(const std::array<int64_t, 3>& d) {
  return std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]);
}
}  // namespace

std::string data_fingerprint(const DataSpec& spec) {
  std::lock_guard<std::recursive_mutex> lk(hdf5_mutex());
  Fnv1a h;
  std::vector<float> labels;
  switch (spec.format) {
    case DataFormat::NeuronInverter: {
      const auto f = NeuronInverterFile::open(spec.path, {spec.split});
      const auto& i = f.info(spec.split);
      const int64_t rows = std::min(i.n, kLabelRows);
      labels.resize(static_cast<size_t>(rows * i.p));
      H5File::open_read(spec.path).read_rows_into(NeuronInverterFile::labels_name(spec.split), 0, rows, DType::F32,
                                                  labels.data());
      h.add(labels.data(), labels.size() * sizeof(float));
      return std::to_string(i.n) + " samples of (" + std::to_string(i.t) + ", " + std::to_string(i.c) + ") " +
             dtype_name(i.dtype) + ", labels #" + h.hex();
    }
    case DataFormat::CosmoFlow: {
      const auto f = CosmoFlowFiles::open(detail::cosmo_paths(spec));
      for (size_t k = 0; k < f.num_files(); ++k) {
        const int64_t n = f.samples(k);
        h.add(&n, sizeof n);
      }
      const int64_t rows = std::min(f.samples(0), kLabelRows);
      labels.resize(static_cast<size_t>(rows * f.params()));
      H5File::open_read(f.path(0)).read_rows_into("unitPar", 0, rows, DType::F32, labels.data());
      h.add(labels.data(), labels.size() * sizeof(float));
      return std::to_string(f.total()) + " samples in " + std::to_string(f.num_files()) + " file(s) of " +
             dims_text(f.dims()) + " " + dtype_name(f.dtype()) + ", labels #" + h.hex();
    }
    case DataFormat::CosmoFlowLbann: {
      const auto paths = detail::cosmo_paths(spec);
      const auto f = CosmoFlowLbannFiles::open(paths);
      for (size_t k = 0; k < std::min<size_t>(paths.size(), 16); ++k) {
        const Tensor lf = H5File::open_read(paths[k]).read("unitPar", DType::F32);
        h.add(lf.raw_data(), static_cast<size_t>(lf.numel()) * sizeof(float));
      }
      return std::to_string(f.size()) + " sample file(s) of " + dims_text(f.dims()) + " " + dtype_name(f.dtype()) +
             ", labels #" + h.hex();
    }
  }
  MRMF_THROW(Usage, "unknown data format");
}

int64_t split_samples(const DataSpec& spec) {
  std::lock_guard<std::recursive_mutex> lk(hdf5_mutex());
  switch (spec.format) {
    case DataFormat::NeuronInverter: return NeuronInverterFile::open(spec.path, {spec.split}).info(spec.split).n;
    case DataFormat::CosmoFlow: return CosmoFlowFiles::open(detail::cosmo_paths(spec)).total();
    case DataFormat::CosmoFlowLbann: return static_cast<int64_t>(detail::cosmo_paths(spec).size());
  }
  MRMF_THROW(Usage, "unknown data format");
}

}  // namespace mrmf::data
