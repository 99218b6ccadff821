// glr/cuda/sm90/emu/forward_emu.cpp: glr/cuda/sm90/forward.cu, unchanged, on the host emulator (sm90_emu.hpp):
// forward_refusal, forward_workspace_bytes and launch_forward as the CUDA build has them, launching the emulated
// kernels.
#include "sm90_emu.hpp"
// clang-format off
#include "../forward.cu"
// clang-format on
