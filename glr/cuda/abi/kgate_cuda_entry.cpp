// kgate entry points of the CUDA kernels: built twice, as glr_cuda_kgate_fwd (GLR_KGATE_BACKWARD=0) and
// glr_cuda_kgate_bwd (=1), one library per pass so each pairs with one contract. The workspace comes from
// cudaMallocAsync on the caller's stream; nothing synchronises it. Packed offsets are read on the device
// (an invalid set makes every output NaN, never a silent result).
#include <cuda_runtime.h>

#include <string>

#include "abi_call.hpp"
#include "glr/glr_cuda.hpp"

using namespace glr;

namespace {

// Runs on the tensors' device, leaving the caller's current device as it was.
class OnDevice {
 public:
  explicit OnDevice(int device) {
    cudaGetDevice(&previous_);
    if (device != previous_ && cudaSetDevice(device) != cudaSuccess)
      throw cuda::CudaError("glr: cannot select CUDA device " + std::to_string(device));
  }
  ~OnDevice() { cudaSetDevice(previous_); }

 private:
  int previous_ = 0;
};

}  // namespace

extern "C" KGATE_EXPORT int32_t kgate_abi_version(void) { return KGATE_ABI_VERSION; }
extern "C" KGATE_EXPORT int32_t kgate_device(void) { return kDLCUDA; }

namespace {
int32_t run(const kgate_call* call, bool force_blocks) {
  return abi::guarded_entry(call, [&] {
    const abi::Call c = abi::read_call(*call, GLR_KGATE_BACKWARD != 0, kDLCUDA);
    const OnDevice on(c.q.t->device.device_id);
    const cuda::DeviceOffsets off = c.offsets;
    const auto stream = static_cast<cudaStream_t>(call->stream);
    if (GLR_KGATE_BACKWARD) {
      cuda::BackwardOptions options;
      options.force_blocks = force_blocks;
      cuda::backward(c.params, abi::backward_tensors(c), off, stream, options);
    } else {
      cuda::ForwardOptions options;
      options.force_blocks = force_blocks;
      cuda::forward(c.params, abi::forward_tensors(c), off, stream, options);
    }
  });
}
}  // namespace

// kgate_run: what glr's API does (on sm_90 the forward dispatches bf16 dense K = V calls to the tensor-core
// forward, the backward's bf16 K = V (64, 128) calls of every member to the tensor-core backward:
// glr/contracts/sm90). kgate_run_blocks: the block programs only, in both passes (glr/contracts/cuda, whose f32
// bounds are theirs).
extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) { return run(call, false); }
extern "C" KGATE_EXPORT int32_t kgate_run_blocks(const kgate_call* call) { return run(call, true); }
