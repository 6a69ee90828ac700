#include "core/device.h"

#include <cstdlib>

#include "core/error.h"
#include "core/log.h"
#ifdef MRMF_HAVE_CUDA
#include <cuda_runtime.h>

#include "core/check_cuda.h"
#endif

namespace mrmf {

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }

Device parse_device(const std::string& s) {
  if (s == "cpu") return Device::cpu();
  if (s == "cuda") return Device::cuda(0);
  if (s.rfind("cuda:", 0) == 0) {
    const std::string idx = s.substr(5);
    char* end = nullptr;
    long i = std::strtol(idx.c_str(), &end, 10);
    if (!idx.empty() && end && *end == '\0' && i >= 0) return Device::cuda(static_cast<int>(i));
  }
  MRMF_THROW(Usage, "unknown device '", s, "': expected cpu, cuda, cuda:N or auto");
}

bool built_with_cuda() noexcept {
#ifdef MRMF_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_device_count() noexcept {
#ifdef MRMF_HAVE_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return 0;
  }
  return n;
#else
  return 0;
#endif
}

std::string cuda_unavailable_reason() {
#ifdef MRMF_HAVE_CUDA
  int n = 0;
  cudaError_t st = cudaGetDeviceCount(&n);
  cudaGetLastError();
  if (st != cudaSuccess) return cudaGetErrorString(st);
  return n > 0 ? "" : "no CUDA device";
#else
  return "mrmf was built without the CUDA backend";
#endif
}

int local_rank_from_env() noexcept {
  for (const char* var : {"MPI_LOCALRANKID", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK",
                          "PALS_LOCAL_RANKID"}) {
    if (const char* v = std::getenv(var)) return std::atoi(v);
  }
  return -1;
}

void set_current_device(Device d) {
#ifdef MRMF_HAVE_CUDA
  if (d.is_cuda()) MRMF_CUDA_CHECK(cudaSetDevice(d.index));
#else
  MRMF_CHECK_KIND(Device, d.is_cpu(), "device ", d.str(), " requested but mrmf was built without CUDA");
#endif
}

Device select_device(const RuntimeOptions& opts) {
  std::string want = opts.device;
  if (want.empty()) {
    const char* env = std::getenv("MRMF_DEVICE");
    want = env ? env : "auto";
  }
  if (want == "cpu") return Device::cpu();

  const int n = cuda_device_count();
  if (want == "auto") {
    if (n == 0) {
      if (!opts.quiet) log::info("mrmf: no usable GPU ({}); using the CPU backend", cuda_unavailable_reason());
      return Device::cpu();
    }
    want = "cuda";
  }
  Device d = parse_device(want);
  MRMF_CHECK_KIND(Device, n > 0, "device '", want, "' was forced but no GPU is usable: ", cuda_unavailable_reason());
  if (want == "cuda") {
    // One rank per GPU: the node-local rank picks the device.
    int lr = opts.local_rank >= 0 ? opts.local_rank : local_rank_from_env();
    d.index = lr >= 0 ? lr % n : 0;
  }
  MRMF_CHECK_KIND(Device, d.index < n, "device ", d.str(), " requested but only ", n, " GPU(s) are visible");
  set_current_device(d);
  if (!opts.quiet) log::info("mrmf: using {}", d.str());
  return d;
}

}  // namespace mrmf
