// A minimal NVTX injection library for the tests (not part of mrmf): loaded
// by NVTX itself when NVTX_INJECTION64_PATH names it -- the way Nsight
// Systems attaches -- it writes the name of every range pushed with
// nvtxRangePushA, one per line, to the file named by MRMF_NVTX_LOG.
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace {
std::FILE* g_out = nullptr;
std::mutex g_mu;

int NVTX_API push_a(const char* message) {
  std::lock_guard<std::mutex> l(g_mu);
  std::fprintf(g_out, "%s\n", message ? message : "");
  std::fflush(g_out);
  return 0;
}
int NVTX_API pop() { return 0; }
}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
  const char* path = std::getenv("MRMF_NVTX_LOG");
  if (!path || !(g_out = std::fopen(path, "w"))) return 0;
  const auto* cb = static_cast<const NvtxExportTableCallbacks*>(get(NVTX_ETID_CALLBACKS));
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!cb || !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) || size <= NVTX_CBID_CORE_RangePop)
    return 0;
  *table[NVTX_CBID_CORE_RangePushA] = reinterpret_cast<NvtxFunctionPointer>(&push_a);
  *table[NVTX_CBID_CORE_RangePop] = reinterpret_cast<NvtxFunctionPointer>(&pop);
  return 1;
}
