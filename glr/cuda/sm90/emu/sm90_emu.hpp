// glr/cuda/sm90/emu/sm90_emu.hpp: the sm90 tensor-core kernels (gdn_fwd_mma.cuh, gdn_bwd_mma.cuh) on the host
// emulator (tests/glr_sm90/emu.hpp: each CUDA thread a fiber of the block's host thread, ldmatrix / mma.sync /
// shuffles / barriers from their PTX definitions), behind glr's own host code: forward_emu.cpp and backward_emu.cpp
// compile glr/cuda/sm90/forward.cu and backward.cu unchanged (their refusals, argument setup, workspace sizing and
// carving) and the .cuh files' launchers, whose launches (launch_kernel, mma_sync.cuh) run on the emulator in this
// build.
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
#include "../../../../tests/glr_sm90/emu_wgmma.hpp"  // emu.hpp and the wgmma twins (gdn_bwd_wgmma.cuh)
#include "../state_slice.cuh"
// clang-format on
#include <cuda_runtime.h>

namespace glr::cuda::sm90 {

// The device the emulated launches stand for: an H200's 132 multiprocessors (state_slice_sms reads the device's
// count under nvcc; the emulator tests use 132 too), so the slice width and split rules choose as they would there.
// Declared before the launchers below, which call them.
inline int state_slice_sms() { return 132; }
inline int state_slice_width(long long heads, int V) { return state_slice_width(heads, V, state_slice_sms()); }

}  // namespace glr::cuda::sm90

// The launchers forward.cu and backward.cu call, gdn_fwd_mma and gdn_bwd_mma, are the .cuh files' own (the same
// kernels in the same order with the same grids: launch_kernel in mma_sync.cuh runs each launch on the emulator,
// to completion, `stream` ignored; the grid-stride poison and group kernels on fewer blocks). The forward takes
// rung 3 (GdnFwdVariant::t_only) only, what forward.cu launches. emu_launch.cpp defines the kernels' shared memory
// and the few CUDA runtime calls the host code makes.
#define GLR_SM90_EMU_LAUNCHERS 1
// clang-format off
#include "../gdn_bwd_mma.cuh"
// clang-format on
