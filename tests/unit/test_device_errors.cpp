// Device discovery never aborts; errors carry file:line, call, status and rank.
#include <catch2/catch.hpp>
#include <cstdlib>

#include "core/check_hdf5.h"
#include "core/check_mpi.h"
#include "core/device.h"
#include "core/error.h"
#include "core/memory.h"
#ifdef MRMF_HAVE_CUDA
#include "core/check_cuda.h"
#endif

using namespace mrmf;

TEST_CASE("device: discovery falls back to the CPU and respects forcing", "[core][device]") {
  RuntimeOptions o;
  o.quiet = true;
  o.device = "cpu";
  REQUIRE(select_device(o).is_cpu());
  if (cuda_device_count() == 0) {
    o.device = "auto";
    REQUIRE(select_device(o).is_cpu());  // no GPU: CPU backend, no abort
    REQUIRE_FALSE(cuda_unavailable_reason().empty());
    o.device = "cuda";
    REQUIRE_THROWS_WITH(select_device(o), Catch::Contains("forced") && Catch::Contains("no GPU"));
  }
  o.device = "tpu";
  REQUIRE_THROWS_WITH(select_device(o), Catch::Contains("unknown device 'tpu'"));
  REQUIRE(parse_device("cuda:3").index == 3);
  REQUIRE(parse_device("cuda:3").str() == "cuda:3");
}

TEST_CASE("device: the local rank comes from the launcher's environment", "[core][device]") {
  ::setenv("MPI_LOCALRANKID", "3", 1);
  REQUIRE(local_rank_from_env() == 3);
  ::unsetenv("MPI_LOCALRANKID");
  ::setenv("SLURM_LOCALID", "1", 1);
  REQUIRE(local_rank_from_env() == 1);
  ::unsetenv("SLURM_LOCALID");
}

TEST_CASE("device: a node-local rank's GPU, by default or from MRMF_GPU_MAP", "[core][device]") {
  CHECK(gpu_for_local_rank(0, 4) == 0);
  CHECK(gpu_for_local_rank(5, 4) == 1);
  CHECK(gpu_for_local_rank(-1, 4) == 0);  // not launched by MPI
  CHECK(gpu_for_local_rank(2, 1) == 0);   // one GPU visible per rank (--gpus-per-task=1)
  // A map reversing the numbering (GPU 3 closest to the first rank's CPUs).
  CHECK(gpu_for_local_rank(0, 4, "3,2,1,0") == 3);
  CHECK(gpu_for_local_rank(3, 4, "3,2,1,0") == 0);
  CHECK(gpu_for_local_rank(6, 4, "3,2,1,0") == 1);  // entries repeat past the map's length
  CHECK(gpu_for_local_rank(1, 2, "1,1") == 1);
  CHECK_THROWS_WITH(gpu_for_local_rank(0, 2, "3,2,1,0"),
                    Catch::Contains("MRMF_GPU_MAP='3,2,1,0' names GPU 3") && Catch::Contains("only 2 GPU(s)"));
  CHECK_THROWS_WITH(gpu_for_local_rank(0, 4, "0,,1"), Catch::Contains("MRMF_GPU_MAP") && Catch::Contains("got ''"));
  CHECK_THROWS_WITH(gpu_for_local_rank(0, 4, "a"), Catch::Contains("got 'a'"));
  CHECK_THROWS_WITH(gpu_for_local_rank(0, 4, "-1"), Catch::Contains("got '-1'"));
}

TEST_CASE("device: Linux cpulists, as sysfs gives a GPU's local CPUs", "[core][device]") {
  CHECK(parse_cpulist("0-3,8,10-11\n") == std::vector<int>{0, 1, 2, 3, 8, 10, 11});
  CHECK(parse_cpulist("5") == std::vector<int>{5});
  CHECK(parse_cpulist("").empty());
  CHECK_THROWS_WITH(parse_cpulist("0-3,x"), Catch::Contains("malformed cpulist") && Catch::Contains("'x'"));
  CHECK_THROWS_WITH(parse_cpulist("7-2"), Catch::Contains("'7-2'"));
  CHECK_THROWS_WITH(parse_cpulist("1-2-3"), Catch::Contains("'1-2-3'"));
}

TEST_CASE("errors: messages carry file:line, the call, the status text and the rank", "[core][errors]") {
  set_error_rank(5);
  try {
    MRMF_CHECK(1 + 1 == 3, "arithmetic is broken: ", 42);
    FAIL("no throw");
  } catch (const Error& e) {
    const std::string m = e.what();
    CHECK_THAT(m, Catch::Contains("[rank 5]") && Catch::Contains("test_device_errors.cpp:") &&
                      Catch::Contains("arithmetic is broken: 42") && Catch::Contains("1 + 1 == 3"));
  }
  // MPI: an invalid communicator handle returns an error code (MPI_ERRORS_RETURN is
  // not needed for MPI_Error_string itself); check the text mapping.
  REQUIRE_FALSE(detail::mpi_error_text(MPI_ERR_COMM).empty());
  // HDF5: opening a missing file fails with HDF5's own status text.
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  try {
    MRMF_H5_CHECK(H5Fopen("/nonexistent/mrmf.h5", H5F_ACC_RDONLY, H5P_DEFAULT));
    FAIL("no throw");
  } catch (const Error& e) {
    const std::string m = e.what();
    CHECK_THAT(m, Catch::Contains("HDF5 error") && Catch::Contains("H5Fopen") && Catch::Contains("[rank 5]"));
    CHECK(e.kind() == ErrorKind::Data);
  }
#ifdef MRMF_HAVE_CUDA
  try {
    MRMF_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("CUDA error") && Catch::Contains("cudaErrorInvalidValue"));
  }
  try {
    MRMF_CUDNN_CHECK(CUDNN_STATUS_BAD_PARAM);
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("cuDNN error") && Catch::Contains("BAD_PARAM"));
  }
  try {
    MRMF_CUBLAS_CHECK(CUBLAS_STATUS_INVALID_VALUE);
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("cuBLAS error"));
  }
  try {
    MRMF_NCCL_CHECK(ncclInvalidArgument);
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("NCCL error"));
  }
#endif
  set_error_rank(-1);
}

TEST_CASE("memory: caching allocator size classes", "[core][memory]") {
  REQUIRE(caching_round_size(1) == 512);
  REQUIRE(caching_round_size(512) == 512);
  REQUIRE(caching_round_size(513) == 1024);
  REQUIRE(caching_round_size((1 << 20) + 1) == size_t(2) << 20);
  REQUIRE(caching_round_size(size_t(5) << 20) == size_t(6) << 20);
  void* p = pinned_alloc(100);  // plain aligned memory without a GPU
  REQUIRE(reinterpret_cast<uintptr_t>(p) % 64 == 0);
  pinned_free(p);
}
