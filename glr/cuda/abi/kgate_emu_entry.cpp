// The CUDA pipeline's host emulation (glr/cuda/emu) behind kgate_run on the CPU: the same stage sources,
// the same entry conventions and dtype rules as the CUDA libraries, packed offsets read as device-only
// offsets. It lets every kgate gate run against the kernels' logic on a machine with no GPU; built as
// glr_cuda_emu_kgate_fwd and glr_cuda_emu_kgate_bwd.
#include "abi_call.hpp"
#include "emu/emulate.hpp"

using namespace glr;

extern "C" KGATE_EXPORT int32_t kgate_abi_version(void) { return KGATE_ABI_VERSION; }
extern "C" KGATE_EXPORT int32_t kgate_device(void) { return kDLCPU; }

// The emulation runs the block programs only: kgate_run_blocks (the symbol the cuda contracts name for the
// GPU library) is the same entry.
extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call);
extern "C" KGATE_EXPORT int32_t kgate_run_blocks(const kgate_call* call) { return kgate_run(call); }

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  return abi::guarded_entry(call, [&] {
    const abi::Call c = abi::read_call(*call, GLR_KGATE_BACKWARD != 0, kDLCPU);
    const cuda::DeviceOffsets off = c.offsets;
    cuda::EmuOptions opt;
    opt.wide_dtypes = false;  // the GPU's dtype rules
    if (GLR_KGATE_BACKWARD)
      cuda::emulate_backward<float>(c.params, abi::backward_tensors(c), opt, &off);
    else
      cuda::emulate_forward<float>(c.params, abi::forward_tensors(c), opt, &off);
  });
}
