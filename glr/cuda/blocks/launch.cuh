// glr/cuda/blocks/launch.cuh: one __global__ per stage, and the GPU Runner of pipeline.hpp.
//
// Every stage runs through stage_kernel<Stage>: the block program with DeviceBlock. Each launch is checked
// (configuration, shared-memory limit, cudaGetLastError) and a failure throws CudaError naming the stage.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "../common/pipeline.hpp"
#include "glr/glr_cuda.hpp"

namespace glr::cuda {

inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw CudaError(std::string("glr cuda: ") + what + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

template <class Stage>
__global__ void __launch_bounds__(Stage::kThreads) stage_kernel(const __grid_constant__ typename Stage::Args a) {
  extern __shared__ __align__(16) char smem[];
  DeviceBlock blk;
  Stage::run(a, BlockIdx{static_cast<std::int64_t>(blockIdx.x), static_cast<int>(blockIdx.y),
                         static_cast<int>(blockIdx.z)},
             smem, blk);
}

struct GpuRunner {
  cudaStream_t stream;

  void clear_status(std::int32_t* status) {
    check_cuda(cudaMemsetAsync(status, 0, sizeof(std::int32_t), stream), "clearing the status word");
  }

  template <class Stage>
  void run(const typename Stage::Args& a, std::int64_t gx, int gy, int gz) {
    if (gx <= 0 || gy <= 0 || gz <= 0) return;  // nothing to do (T = 0, no tokens in any sequence)
    const std::size_t smem = Stage::smem_bytes();
    auto* kernel = &stage_kernel<Stage>;
    if (smem > 48 * 1024) {
      int device = 0, optin = 0;
      check_cuda(cudaGetDevice(&device), Stage::kName);
      check_cuda(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), Stage::kName);
      if (smem > static_cast<std::size_t>(optin))
        throw CudaError(std::string("glr cuda: ") + Stage::kName + " needs " + std::to_string(smem) +
                        " bytes of shared memory per block; this device allows " + std::to_string(optin));
      check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
                 Stage::kName);
    }
    kernel<<<dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy), static_cast<unsigned>(gz)), Stage::kThreads,
             smem, stream>>>(a);
    check_cuda(cudaGetLastError(), Stage::kName);
  }
};

}  // namespace glr::cuda
