// NVTX ranges for Nsight Systems: `MRMF_NVTX_RANGE("forward");` marks the
// enclosing scope. Compiles to nothing without the CUDA backend's NVTX headers.
#pragma once

#if defined(MRMF_HAVE_NVTX)
#include <nvtx3/nvToolsExt.h>
namespace mrmf {
class NvtxRange {
 public:
  explicit NvtxRange(const char* name) { nvtxRangePushA(name); }
  ~NvtxRange() { nvtxRangePop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};
}  // namespace mrmf
#define MRMF_NVTX_CONCAT2(a, b) a##b
#define MRMF_NVTX_CONCAT(a, b) MRMF_NVTX_CONCAT2(a, b)
#define MRMF_NVTX_RANGE(name) ::mrmf::NvtxRange MRMF_NVTX_CONCAT(mrmf_nvtx_, __LINE__)(name)
#else
#define MRMF_NVTX_RANGE(name) \
  do {                        \
  } while (0)
#endif
