// Fixtures shared by the loader tests (test_loader.cpp, test_loader_mapped.cpp,
// test_loader_input.cpp):
// small Neuron Inverter and CosmoFlow files whose values name their sample,
// an epoch's sample ids, exact tensor equality, an error's text.
#pragma once

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/formats.h"
#include "data/loader.h"
#include "support/temp_dir.h"

namespace mrmf::test::loader {

using namespace mrmf::data;
namespace fs = std::filesystem;

struct Tmp : test::TempDir {
  Tmp() : test::TempDir("mrmf_ld") {}
};

// frames[i, t, c] = i + t / 100 + c / 1000 ... kept exact enough; labels[i, 0] = i.
inline float ni_value(int64_t i, int64_t t, int64_t c) { return static_cast<float>(i) + 0.01f * t + 0.001f * c; }
inline void write_ni(const std::string& path, int64_t n, int64_t t, float bad_frame = 0, float bad_label = 0) {
  NeuronInverterWriter w(path, DType::F32);
  w.create_split(Split::Train, n, t, 3);
  Tensor f = Tensor::empty({n, t, 3}), l = Tensor::full({n, 19}, 0.f);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < t; ++j)
      for (int64_t c = 0; c < 3; ++c) f.data<float>()[(i * t + j) * 3 + c] = ni_value(i, j, c);
    l.data<float>()[i * 19] = static_cast<float>(i);
  }
  if (bad_frame != 0) f.data<float>()[5] = bad_frame;
  if (bad_label != 0) l.data<float>()[19 * 2 + 1] = bad_label;
  w.write(Split::Train, 0, f, l);
}

// Files of `per` samples each; 3Dmap[g, d, h, w, c] = (g + d + h + w + c) % 50 (uint16), unitPar[g, 0] = g.
inline void write_cf(const std::string& dir, int files, int per, int side) {
  fs::create_directories(dir);
  int64_t g = 0;
  for (int f = 0; f < files; ++f) {
    Tensor x = Tensor::empty({per, side, side, side, 4}), l = Tensor::full({per, 4}, 0.f);
    for (int64_t s = 0; s < per; ++s, ++g) {
      for (int64_t e = 0; e < side * side * side * 4; ++e)
        x.data<float>()[s * side * side * side * 4 + e] = float((g + e) % 50);
      l.data<float>()[s * 4] = static_cast<float>(g);
    }
    char name[32];
    std::snprintf(name, sizeof name, "/c%02d.h5", f);
    write_cosmoflow_file(dir + name, from_float32(x, DType::U16), l);
  }
}

inline std::vector<int64_t> epoch_ids(Loader& L, int64_t epoch, std::vector<Tensor>* xs = nullptr) {
  L.start_epoch(epoch);
  std::vector<int64_t> ids;
  LoaderBatch b;
  while (L.next(b)) {
    REQUIRE(b.y.size(0) == L.batch_size());
    for (int64_t j = 0; j < b.y.size(0); ++j) ids.push_back(static_cast<int64_t>(b.y.at({j, 0})));
    if (xs) xs->push_back(b.x);
  }
  return ids;
}

inline bool same(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

inline std::string err(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace mrmf::test::loader
