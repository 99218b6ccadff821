// glr/cuda/sm90/emu/emu_launch.cpp: what the emulated build (sm90_emu.hpp) needs besides the .cuh files' kernels
// and launchers: the kernels' shared memory, and the CUDA runtime calls of forward.cu, backward.cu and the
// launchers on the host. The launchers themselves are gdn_fwd_mma.cuh's and gdn_bwd_mma.cuh's (launch_kernel,
// mma_sync.cuh, runs each launch on the emulator).
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "sm90_emu.hpp"

// The kernels' `extern __shared__` array, the forward's and the backward's (gdn::smem_raw and gdn_bwd::smem_raw name
// it: mma_sync.cuh declares it with C language linkage). Blocks run one after another (emu::launch), so one array
// serves every block.
namespace glr::cuda::sm90::gdn {
alignas(16) char smem_raw[256 * 1024];
}

// The CUDA runtime as the host code uses it here: memory is host memory, nothing is asynchronous. No cudart is
// linked into the emulator's libraries, so these are the only definitions.
// Under GLR_EMU_DRY (launches checked, not run: mma_sync.cuh launch_kernel) nothing is written either: the dry runs
// carve their workspace at a stand-in address (tests/glr_sm90/split_dry.cpp), and the backward's GVA launch zeroes
// its arrival tickets there (gdn_bwd_mma.cuh chunk_group_args).
extern "C" cudaError_t cudaMemsetAsync(void* p, int value, std::size_t bytes, cudaStream_t) {
  if (std::getenv("GLR_EMU_DRY") != nullptr) return cudaSuccess;
  std::memset(p, value, bytes);
  return cudaSuccess;
}
// The backward given the forward's saved wy outputs copies their status word (gdn_bwd_mma.cuh launch_all).
extern "C" cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind, cudaStream_t) {
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}
// The device's side of each kernel's dynamic shared-memory limit. launch_kernel (mma_sync.cuh) sets it through
// ensure_dynamic_smem, the device build's own function, with these two calls; then it refuses a launch past the
// recorded limit, as the GPU does (cudaErrorInvalidValue), so a launch whose attribute is not what launch_kernel
// believes it set fails here too (tests/glr_sm90/emu_launch_test.cpp).
namespace {
std::mutex limits_mutex;
std::map<const void*, int>& dynamic_smem_limits() {
  static std::map<const void*, int> m;
  return m;
}
}  // namespace
// One emulated device, number 0 (an H200: 132 multiprocessors, sm90_emu.hpp).
extern "C" cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
// As the H200 takes it: a limit of 0 to 227 KB (its opt-in maximum), anything else cudaErrorInvalidValue.
extern "C" cudaError_t cudaFuncSetAttribute(const void* kernel, cudaFuncAttribute attr, int value) {
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || value > 227 * 1024) return cudaErrorInvalidValue;
    const std::lock_guard<std::mutex> lock(limits_mutex);
    dynamic_smem_limits()[kernel] = value;
  }
  return cudaSuccess;
}
extern "C" int glr_emu_max_dynamic_smem(const void* kernel) {
  const std::lock_guard<std::mutex> lock(limits_mutex);
  const auto it = dynamic_smem_limits().find(kernel);
  return it == dynamic_smem_limits().end() ? 48 * 1024 : it->second;
}
// For tests only: every kernel's limit back to the 48 KB default, the device's side alone (launch_kernel's record
// of what it set stays), as when the launch goes through a host stub whose attribute was never set (the GPU's
// failure of 2026-12-05); returns how many kernels had a limit. tests/glr_sm90/emu_launch_test.cpp.
extern "C" int glr_emu_forget_dynamic_smem_limits() {
  const std::lock_guard<std::mutex> lock(limits_mutex);
  const int n = static_cast<int>(dynamic_smem_limits().size());
  dynamic_smem_limits().clear();
  return n;
}
// Events between launches, when asked: nothing is asynchronous, there is nothing to wait for (forward.cu and
// backward.cu pass none).
extern "C" cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
extern "C" const char* cudaGetErrorName(cudaError_t e) {
  return e == cudaSuccess ? "cudaSuccess" : e == cudaErrorInvalidValue ? "cudaErrorInvalidValue" : "cudaError";
}
extern "C" const char* cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : e == cudaErrorInvalidValue ? "invalid argument" : "an emulated launch failed";
}
