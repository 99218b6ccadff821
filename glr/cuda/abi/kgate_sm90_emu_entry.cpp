// kgate entry points of the sm90 tensor-core kernels on the host emulator: built as glr_sm90_emu_kgate_fwd and
// glr_sm90_emu_kgate_bwd (GLR_KGATE_BACKWARD=0, 1), one library per pass, so kgate's gates run against the
// tensor-core forward and backward (glr/cuda/sm90/gdn_fwd_mma.cuh, gdn_bwd_mma.cuh) on a machine with no GPU.
// Contracts: glr/contracts/sm90-emu (profile sm90-emu of glr/contracts/generate.py).
//
// The call is read by the one binder (abi::read_call), checked by the API's setup (setup_forward /
// setup_backward), then judged by the dispatch's own sm90::forward_refusal / backward_refusal: a call the
// tensor-core path does not take is KGATE_REFUSED with that reason, never a silent run of the block programs
// (glr_cuda_emu_kgate_* emulates those). What runs is glr/cuda/sm90/forward.cu and backward.cu (argument setup,
// workspace sizing and carving, launch) compiled against the emulator (glr/cuda/sm90/emu, library glr_sm90_emu);
// this file sees only their host declarations (sm90/forward.hpp, backward.hpp), never the emulator's headers.
// The workspace is filled with 0x7f bytes (~3.4e38 as fp32 or bf16) first, so a read of an unwritten word shows.
// Packed offsets are read where the kernels read them, as device-only offsets (invalid ones: every output NaN).
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include "abi_call.hpp"
#include "common/setup.hpp"
#include "sm90/backward.hpp"
#include "sm90/forward.hpp"

using namespace glr;

extern "C" KGATE_EXPORT int32_t kgate_abi_version(void) { return KGATE_ABI_VERSION; }
extern "C" KGATE_EXPORT int32_t kgate_device(void) { return kDLCPU; }

namespace {

// The emulator keeps one shared-memory array per kernel family and runs blocks one after another: one call at a
// time.
std::mutex emulator;

struct Workspace {
  explicit Workspace(std::size_t bytes) : bytes(bytes), p(std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256)) {
    if (p == nullptr) throw std::bad_alloc();
    std::memset(p, 0x7f, bytes);
  }
  ~Workspace() { std::free(p); }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  std::size_t bytes;
  void* p;
};

}  // namespace

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  return abi::guarded_entry(call, [&] {
    const abi::Call c = abi::read_call(*call, GLR_KGATE_BACKWARD != 0, kDLCPU);
    const std::lock_guard<std::mutex> lock(emulator);
    if (GLR_KGATE_BACKWARD) {
      const cuda::Problem p = cuda::setup_backward(c.params, abi::backward_tensors(c), c.offsets);
      if (const std::string why = cuda::sm90::backward_refusal(p); !why.empty())
        throw abi::Refusal("sm90 tensor-core backward (host emulation) does not take this call: " + why);
      const Workspace ws(cuda::sm90::backward_workspace_bytes(p));
      cuda::sm90::launch_backward(p, ws.p, ws.bytes, nullptr);
    } else {
      const cuda::Problem p = cuda::setup_forward(c.params, abi::forward_tensors(c), c.offsets);
      if (const std::string why = cuda::sm90::forward_refusal(p); !why.empty())
        throw abi::Refusal("sm90 tensor-core forward (host emulation) does not take this call: " + why);
      const Workspace ws(cuda::sm90::forward_workspace_bytes(p));
      cuda::sm90::launch_forward(p, ws.p, ws.bytes, nullptr);
    }
  });
}
