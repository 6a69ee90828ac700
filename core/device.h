// Devices and backend discovery.
//
// Discovery never aborts: a machine without a driver or without a GPU gets the
// CPU backend and a one-line notice. MRMF_DEVICE=cpu|cuda|auto (or the
// --device flag, which fills RuntimeOptions) forces a backend; forcing `cuda`
// where none exists is an error, not a silent fallback. With several GPUs per
// node, the local MPI rank picks the device (one rank per GPU).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mrmf {

enum class DeviceType : uint8_t { CPU = 0, CUDA = 1 };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int i = 0) { return {DeviceType::CUDA, i}; }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  std::string str() const;  // "cpu" or "cuda:N"
  bool operator==(const Device& o) const { return type == o.type && (type == DeviceType::CPU || index == o.index); }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

// Parses "cpu", "cuda", "cuda:1". Throws Usage on anything else.
Device parse_device(const std::string& s);

// True when this binary contains the CUDA backend.
bool built_with_cuda() noexcept;
// Number of usable CUDA devices; 0 without a CUDA build, driver or GPU. Never throws.
int cuda_device_count() noexcept;
// Why cuda_device_count() is 0 (driver missing, no device, ...); empty when > 0.
std::string cuda_unavailable_reason();

// The node-local rank from the launcher's environment (MPICH/Hydra, Slurm,
// Open MPI), or -1 when not launched under one.
int local_rank_from_env() noexcept;

// The GPU of node-local rank `local_rank` among `visible` devices: local
// rank modulo the count, or, with `map` (MRMF_GPU_MAP, e.g. "3,2,1,0"),
// entry local_rank modulo its length -- for nodes whose GPU numbering runs
// against the ranks' CPU placement (check `nvidia-smi topo -m`). Throws
// Usage naming MRMF_GPU_MAP for an entry that is not a visible device.
int gpu_for_local_rank(int local_rank, int visible, const std::string& map = "");

// CPU ids of a Linux cpulist ("0-15,64-79"); Usage error when malformed.
std::vector<int> parse_cpulist(const std::string& list);

// The most OpenMP threads a run may ask for (runtime.threads, --threads):
// each has its own stack, and 100000 of them crash the process instead of
// failing with a message.
constexpr int64_t kMaxThreads = 4096;

struct RuntimeOptions {
  std::string device = "";  // "", "auto", "cpu", "cuda", "cuda:N"; "" means $MRMF_DEVICE or auto
  int local_rank = -1;      // -1: from the environment
  bool quiet = false;       // suppress the one-line notice
};

// Chooses the device for this process and makes it current (cudaSetDevice).
Device select_device(const RuntimeOptions& opts = {});

// Makes `d` the current CUDA device of the calling thread (no-op on CPU).
void set_current_device(Device d);

}  // namespace mrmf
