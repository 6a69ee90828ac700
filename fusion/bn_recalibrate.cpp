#include "fusion/bn_recalibrate.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace mrmf {

BnRecalibration recalibrate_batchnorm(Model& model, Context& ctx, data::Loader& loader, Communicator& comm,
                                      int64_t batches, int64_t epoch) {
  MRMF_CHECK_KIND(Usage, batches >= 0, "BN re-calibration: batches must be >= 0, got ", batches);
  BnRecalibration r;
  // The buffers are exactly the BN running statistics (and their batch
  // counters); a model without any has nothing to re-estimate.
  if (batches == 0 || model.params().buffers().numel() == 0) return r;
  const auto t0 = std::chrono::steady_clock::now();
  ctx.set_training(true);
  loader.start_epoch(epoch);
  // Every rank forwards the same number of batches (the loaders' epochs are
  // equal-length across ranks), so the collective below always matches.
  const int64_t n = std::min(batches, loader.batches_per_epoch());
  {
    // Whatever happens (a loader error), the layers get their own momentum
    // back and no activations stay saved for a backward that never comes.
    // The dropout step is left alone: forwards do not advance it.
    struct Restore {
      Context& ctx;
      Model& model;
      ~Restore() {
        ctx.set_bn_momentum_override(-1);
        model.net().clear_saved();
      }
    } restore{ctx, model};
    data::LoaderBatch b;
    while (r.batches < n && loader.next(b)) {
      ctx.set_bn_momentum_override(1.0 / static_cast<double>(r.batches + 1));
      (void)model.forward(ctx, b.x);
      // Wait for the forward before the loader allocates the next batch: the
      // device memory cache is not stream-aware, so activations this forward
      // freed on the host could be handed to the loader's stream while its
      // kernels still use them (training steps end with the same wait).
      ctx.stream().synchronize();
      ++r.batches;
    }
  }
  comm.allreduce_avg(model.params().buffers(), ctx.stream());
  ctx.stream().synchronize();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace mrmf
