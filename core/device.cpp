#include "core/device.h"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <vector>

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

namespace {
// The comma-separated items of `s` ("" -> none; "a,,b" -> a, "", b); a
// trailing comma ends an empty item only with `trailing_item`.
std::vector<std::string> comma_items(const std::string& s, bool trailing_item) {
  std::vector<std::string> items;
  for (size_t at = 0; at < s.size();) {
    const size_t comma = std::min(s.find(',', at), s.size());
    items.push_back(s.substr(at, comma - at));
    at = comma + 1;
    if (trailing_item && at == s.size()) items.emplace_back();
  }
  return items;
}
}  // namespace

int gpu_for_local_rank(int local_rank, int visible, const std::string& map) {
  const int lr = local_rank >= 0 ? local_rank : 0;
  if (map.empty()) return lr % visible;
  std::vector<int> gpus;
  for (const std::string& item : comma_items(map, /*trailing_item=*/true)) {
    char* end = nullptr;
    const long g = std::strtol(item.c_str(), &end, 10);
    MRMF_CHECK_KIND(Usage, !item.empty() && end && *end == '\0' && g >= 0, "MRMF_GPU_MAP='", map,
                    "': expected comma-separated GPU indices (node-local rank k takes entry k), got '", item, "'");
    MRMF_CHECK_KIND(Usage, g < visible, "MRMF_GPU_MAP='", map, "' names GPU ", g, " but only ", visible,
                    " GPU(s) are visible to this rank");
    gpus.push_back(static_cast<int>(g));
  }
  return gpus[static_cast<size_t>(lr) % gpus.size()];
}

std::vector<int> parse_cpulist(const std::string& list) {
  std::vector<int> cpus;
  std::string l = list;
  while (!l.empty() && (l.back() == '\n' || l.back() == ' ')) l.pop_back();
  for (const std::string& item : comma_items(l, /*trailing_item=*/false)) {
    int a = -1, b = -1;
    char tail = 0;
    const int n = std::sscanf(item.c_str(), "%d-%d%c", &a, &b, &tail);
    if (n == 1) b = a;
    MRMF_CHECK_KIND(Usage, (n == 1 || n == 2) && a >= 0 && b >= a, "malformed cpulist '", list, "' at '", item, "'");
    for (int c = a; c <= b; ++c) cpus.push_back(c);
  }
  return cpus;
}

namespace {
// A notice when none of this process's CPUs is local to the GPU it drives
// (host<->device copies and the loader's pinned buffers then cross NUMA
// domains). Linux only: the GPU's local CPUs come from sysfs.
void check_cpu_locality(Device d) {
#ifdef MRMF_HAVE_CUDA
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, d.index) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  std::string id(bus);
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::ifstream f("/sys/bus/pci/devices/" + id + "/local_cpulist");
  std::string list;
  if (!f || !std::getline(f, list)) return;
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof mine, &mine) != 0) return;
  try {
    const std::vector<int> local = parse_cpulist(list);
    int overlap = 0, count = CPU_COUNT(&mine);
    for (int c : local) overlap += c < CPU_SETSIZE && CPU_ISSET(c, &mine);
    if (overlap == 0 && count > 0 && !local.empty())
      log::warn("mrmf: none of this rank's {} CPUs is local to {} (its CPUs: {}); host-device copies cross NUMA "
                "domains -- map ranks to GPUs with MRMF_GPU_MAP (see `nvidia-smi topo -m`)",
                count, d.str(), list);
  } catch (const Error&) {
  }
#else
  (void)d;
#endif
}
}  // namespace

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
    if (env && want != "cpu" && want != "auto") {  // a bad value is named as the variable's, not a flag's
      try {
        (void)parse_device(want);
      } catch (const Error& e) {
        MRMF_THROW(Usage, "$MRMF_DEVICE: ", e.message());
      }
    }
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
    const int lr = opts.local_rank >= 0 ? opts.local_rank : local_rank_from_env();
    const char* map = std::getenv("MRMF_GPU_MAP");
    d.index = gpu_for_local_rank(lr, n, map ? map : "");
  }
  MRMF_CHECK_KIND(Device, d.index < n, "device ", d.str(), " requested but only ", n, " GPU(s) are visible");
  set_current_device(d);
  if (!opts.quiet) log::info("mrmf: using {}", d.str());
  check_cpu_locality(d);
  return d;
}

}  // namespace mrmf
