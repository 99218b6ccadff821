// glr/cuda/sm90/emu/sm90_emu.hpp: the sm90 tensor-core kernels (gdn_fwd_mma.cuh, gdn_bwd_mma.cuh) on the host
// emulator (tests/glr_sm90/emu.hpp: one host thread per CUDA thread, ldmatrix / mma.sync / shuffles / barriers from
// their PTX definitions), behind glr's own host code: forward_emu.cpp and backward_emu.cpp compile glr/cuda/sm90/
// forward.cu and backward.cu unchanged (their refusals, argument setup, workspace sizing and carving), with the
// launchers below in place of the .cuh files' CUDA launchers (which need nvcc's <<< >>>).
//
// Nothing outside this folder includes this header: callers use sm90/forward.hpp and sm90/backward.hpp, the same
// declarations the CUDA build defines, and link glr_sm90_emu instead of glr_cuda. The emulator's headers (which
// redefine __device__, threadIdx and friends) thus never meet another header of the caller's translation unit.
// Only for GLR_SM90_HOST_EMU builds (glr/cuda/CMakeLists.txt: glr_sm90_emu).
#pragma once

#if !defined(GLR_SM90_HOST_EMU)
#error "glr/cuda/sm90/emu is built with -DGLR_SM90_HOST_EMU"
#endif

// clang-format off
#include "../../../../tests/glr_sm90/emu.hpp"
#include "../gdn_bwd_mma.cuh"
// clang-format on

namespace glr::cuda::sm90 {

// The device the emulated launches stand for: an H200's 132 multiprocessors (state_slice_sms reads the device's
// count under nvcc; the emulator tests use 132 too), so the slice width and split rules choose as they would there.
inline int state_slice_sms() { return 132; }
inline int state_slice_width(long long heads, int V) { return state_slice_width(heads, V, state_slice_sms()); }

// The launchers forward.cu and backward.cu call (the .cuh files define them for nvcc only), running the same
// kernels in the same order with the same grids on the emulator (emu_launch.cpp; kept beside gdn_fwd_mma_launch and
// gdn_bwd::launch_all: a kernel added there must be added here). `stream` and `between` / `marks` are ignored
// (the emulator runs each launch to completion). The forward takes rung 3 (GdnFwdVariant::t_only) only, what
// forward.cu launches.
cudaError_t gdn_fwd_mma(GdnFwdArgs a, cudaStream_t stream, GdnFwdVariant variant = GdnFwdVariant::t_only,
                        cudaEvent_t between = nullptr, int vt = 0);
cudaError_t gdn_bwd_mma(const GdnBwdArgs& args, cudaStream_t stream, cudaEvent_t* marks = nullptr, int vt = 0);

}  // namespace glr::cuda::sm90
