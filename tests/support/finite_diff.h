// Finite-difference gradient checks for modules.
//
// The loss is L = sum_i w_i * y_i with fixed random weights w, accumulated in
// double, so dL/dy = w. Central differences with step eps are compared with
// the analytic input and parameter gradients on a random subset of entries.
// Kinks (ReLU at 0, max-pool ties) are detected by comparing the two one-sided
// differences and skipped -- the derivative is not defined there.
#pragma once

#include <string>

#include "layers/module.h"

namespace mrmf::test {

struct GradCheckOptions {
  double eps = 1e-2;
  double tol = 2e-2;          // max |fd - analytic| / (max |analytic| + 1e-3)
  int max_checks = 48;        // entries checked per tensor
  bool check_input = true;
  bool check_params = true;
  uint64_t seed = 7;
};

struct GradCheckReport {
  double input_err = 0;   // normalized max error over checked input entries
  double param_err = 0;   // normalized max error over checked parameter entries
  int checked = 0;
  int skipped_kinks = 0;
  std::string worst;      // description of the worst entry
};

// `m` must be registered in a finalized store (e.g. through a Model) and in
// the mode (train/eval) the check should use. `x` is a CPU input.
GradCheckReport check_gradients(Module& m, Context& ctx, const Tensor& x, const GradCheckOptions& opt = {});

// Deterministic test data: uniform in [lo, hi) from a Philox stream.
Tensor random_tensor(const Shape& s, uint64_t seed, float lo = -1.f, float hi = 1.f);

// max |a - b| over all elements (CPU tensors).
double max_abs_diff(const Tensor& a, const Tensor& b);
// max |a - b| / (max |b| + floor)
double max_rel_diff(const Tensor& a, const Tensor& b, double floor = 1e-6);

}  // namespace mrmf::test
