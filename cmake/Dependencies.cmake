# Finds mrmf's dependencies and exposes them as two interface targets:
#   mrmf::deps       - everything the CPU backend needs (always)
#   mrmf::cuda_deps  - CUDA runtime, cuDNN, cuBLAS, NCCL (only with the CUDA backend)
# cuDNN and NCCL are searched with hints (CUDNN_ROOT, NCCL_ROOT, CUDA_HOME and the
# usual module variables) so that a cluster's module paths work too.

find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(MPI REQUIRED COMPONENTS CXX)
find_package(HDF5 REQUIRED COMPONENTS C)
# libdeflate: gzip-compressed HDF5 chunks decoded by the loader's threads
# (data/packed_chunks.h); 2-3x zlib's inflate on whole buffers. zlib: the
# unit tests write such chunks with zlib's compress2, as HDF5's own filter
# does (tests/CMakeLists.txt links it).
find_package(ZLIB REQUIRED)
find_path(LIBDEFLATE_INCLUDE_DIR libdeflate.h HINTS $ENV{LIBDEFLATE_ROOT} PATH_SUFFIXES include REQUIRED)
find_library(LIBDEFLATE_LIBRARY deflate HINTS $ENV{LIBDEFLATE_ROOT} PATH_SUFFIXES lib lib64 REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(CLI11 REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json REQUIRED)
# oneDNN: Debian's dnnl-config.cmake insists on OpenCL (its GPU runtime), which
# the CPU backend never uses, so locate the library and header directly.
find_path(DNNL_INCLUDE_DIR dnnl.hpp HINTS $ENV{DNNL_ROOT} $ENV{ONEDNN_ROOT} PATH_SUFFIXES include REQUIRED)
find_library(DNNL_LIBRARY dnnl HINTS $ENV{DNNL_ROOT} $ENV{ONEDNN_ROOT} PATH_SUFFIXES lib lib64 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(FFTW3F REQUIRED IMPORTED_TARGET fftw3f)

add_library(mrmf_deps INTERFACE)
add_library(mrmf::deps ALIAS mrmf_deps)
target_link_libraries(mrmf_deps INTERFACE
  OpenMP::OpenMP_CXX MPI::MPI_CXX ${HDF5_C_LIBRARIES} yaml-cpp CLI11::CLI11
  fmt::fmt spdlog::spdlog nlohmann_json::nlohmann_json ${DNNL_LIBRARY} ${LIBDEFLATE_LIBRARY} PkgConfig::FFTW3F)
target_include_directories(mrmf_deps INTERFACE ${HDF5_C_INCLUDE_DIRS} ${DNNL_INCLUDE_DIR} ${LIBDEFLATE_INCLUDE_DIR})
# spdlog and fmt come from separate Debian packages: use the external fmt.
target_compile_definitions(mrmf_deps INTERFACE SPDLOG_FMT_EXTERNAL)

# --------------------------------------------------------------------------- CUDA
set(MRMF_CUDA_ENABLED OFF)
if(NOT MRMF_WITH_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(MRMF_CUDA_ENABLED ON)
  elseif(MRMF_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "MRMF_WITH_CUDA=ON but no CUDA compiler was found (set CMAKE_CUDA_COMPILER or CUDA_HOME)")
  else()
    message(STATUS "mrmf: no nvcc found, building the CPU backend only")
  endif()
endif()

if(MRMF_CUDA_ENABLED)
  find_package(CUDAToolkit REQUIRED)
  set(_cuda_hints
    ${CUDNN_ROOT} $ENV{CUDNN_ROOT} $ENV{CUDNN_HOME} $ENV{CUDNN_DIR}
    ${NCCL_ROOT} $ENV{NCCL_ROOT} $ENV{NCCL_HOME} $ENV{NCCL_DIR}
    $ENV{CUDA_HOME} ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_TARGET_DIR} /usr/local/cuda /usr)
  find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${_cuda_hints} PATH_SUFFIXES include)
  find_library(CUDNN_LIBRARY cudnn HINTS ${_cuda_hints} PATH_SUFFIXES lib64 lib lib/x86_64-linux-gnu)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_cuda_hints} PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY nccl HINTS ${_cuda_hints} PATH_SUFFIXES lib64 lib lib/x86_64-linux-gnu)
  foreach(v CUDNN_INCLUDE_DIR CUDNN_LIBRARY NCCL_INCLUDE_DIR NCCL_LIBRARY)
    if(NOT ${v})
      message(FATAL_ERROR "mrmf: ${v} not found; set CUDNN_ROOT / NCCL_ROOT, or build the CPU backend only "
                          "(-DMRMF_WITH_CUDA=OFF; with scripts/build.sh, test.sh or run_main.sh: MRMF_PRESET=cpu)")
    endif()
  endforeach()
  message(STATUS "mrmf: CUDA backend ON (cuDNN ${CUDNN_LIBRARY}, NCCL ${NCCL_LIBRARY})")

  add_library(mrmf_cuda_deps INTERFACE)
  add_library(mrmf::cuda_deps ALIAS mrmf_cuda_deps)
  target_include_directories(mrmf_cuda_deps INTERFACE ${CUDNN_INCLUDE_DIR} ${NCCL_INCLUDE_DIR})
  target_link_libraries(mrmf_cuda_deps INTERFACE CUDA::cudart CUDA::cublas ${CUDNN_LIBRARY} ${NCCL_LIBRARY})
  if(TARGET CUDA::nvtx3)
    target_link_libraries(mrmf_cuda_deps INTERFACE CUDA::nvtx3)
    target_compile_definitions(mrmf_cuda_deps INTERFACE MRMF_HAVE_NVTX=1)
  endif()
endif()
