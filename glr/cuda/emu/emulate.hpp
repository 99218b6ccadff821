// glr/cuda/emu/emulate.hpp: the CUDA pipeline run on the host, block by block and phase by phase, from the
// same stage sources the GPU compiles (see common/block.hpp). Acc = float is the GPU's arithmetic (up to
// FMA contraction and the exp implementation); Acc = double is the chunked algorithm in double, for
// checks against the float64 oracle and finite differences at 1e-10.
//
// Tensors are host pointers described exactly as for glr::cuda::forward/backward. The returned run keeps
// the workspace, so every stage's buffer can be compared with its CPU twin or with a GPU workspace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "../common/problem.hpp"
#include "glr/glr_cuda.hpp"

namespace glr::cuda {

struct EmuOptions {
  bool descending_threads = false;  // run each phase's threads last to first
  bool reverse_blocks = false;      // run each grid's blocks last to first
  bool wide_dtypes = true;          // accept fp32/fp64 token tensors (the double emulation needs them)
};

template <class Acc>
struct EmuRun {
  Problem problem;
  std::vector<double> storage;  // the workspace (8-byte aligned); poisoned with NaN bytes before the run
  Work<Acc> work;
  std::size_t workspace_bytes = 0;
};

// offsets: the "device" offsets (host memory here); by default Params::cu_seqlens.
template <class Acc>
EmuRun<Acc> emulate_forward(const Params& params, const ForwardTensors& t, const EmuOptions& opt = {},
                            const DeviceOffsets* offsets = nullptr);
template <class Acc>
EmuRun<Acc> emulate_backward(const Params& params, const BackwardTensors& t, const EmuOptions& opt = {},
                             const DeviceOffsets* offsets = nullptr);

}  // namespace glr::cuda
