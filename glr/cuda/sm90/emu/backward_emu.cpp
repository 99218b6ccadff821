// glr/cuda/sm90/emu/backward_emu.cpp: glr/cuda/sm90/backward.cu, unchanged, on the host emulator (sm90_emu.hpp):
// backward_refusal, backward_workspace_bytes and launch_backward as the CUDA build has them, launching the
// emulated kernels.
#include "sm90_emu.hpp"
// clang-format off
#include "../backward.cu"
// clang-format on
