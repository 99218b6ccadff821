// glr/cuda/common/setup.hpp: from glr::Params and the caller's tensors to the Problem the stages take,
// after every check (host only, no CUDA). Shared by the CUDA entry points and the emulator.
#pragma once

#include "glr/glr_cuda.hpp"
#include "problem.hpp"

namespace glr::cuda {

struct SetupOptions {
  bool wide_dtypes = false;  // emulator: also accept fp32/fp64 token tensors and any float state dtype
};

// Throw glr::InvalidArgument naming the first bad argument.
Problem setup_forward(const Params& params, const ForwardTensors& t, const DeviceOffsets& off,
                      const SetupOptions& opt = {});
Problem setup_backward(const Params& params, const BackwardTensors& t, const DeviceOffsets& off,
                       const SetupOptions& opt = {});
// Sizes only (for the workspace queries): no tensor is looked at.
Problem setup_sizes(const Params& params, const DeviceOffsets& off, Pass pass);

}  // namespace glr::cuda
