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

// What fills memory before anything is written to it: the workspace once before the run, each block's
// shared memory before the block runs. A GPU gives neither a defined value (cudaMalloc and
// cudaMallocAsync return whatever the memory last held; shared memory keeps what the previous block on
// the SM left), so a run must not depend on the fill: two runs with different fills give the same bits,
// and a NaN fill never reaches an output.
struct EmuFill {
  enum Kind : int {
    nan_bytes = 0,  // every byte 0xff: a NaN in fp32 and fp64, -1 in an integer
    zero = 1,       // every byte 0
    random = 2,     // every Acc-sized word a random finite value in (-4, 4) from `seed` (integers: garbage)
  };
  Kind kind = nan_bytes;
  std::uint64_t seed = 0;
};

struct EmuOptions {
  bool descending_threads = false;  // run each phase's threads last to first
  bool reverse_blocks = false;      // run each grid's blocks last to first
  bool wide_dtypes = true;          // accept fp32/fp64 token tensors (the double emulation needs them)
  EmuFill workspace_fill{};         // the workspace before the run
  EmuFill smem_fill{};              // every block's shared memory before it runs (each block its own draw)
  bool concurrent_blocks = false;   // every block of a launch sees the workspace as it was before the launch
  bool concurrent_threads = false;  // every thread of a phase sees shared memory as it was before the phase
                                    // (slow: a copy of shared memory per thread and phase)
};

// Fills `bytes` bytes at p as `fill` says, in words of `word` bytes (4: fp32 values, 8: fp64) for random;
// `stream` tells apart the fills made from one seed (blocks, buffers).
void fill_memory(void* p, std::size_t bytes, const EmuFill& fill, std::size_t word, std::uint64_t stream = 0);

template <class Acc>
struct EmuRun {
  Problem problem;
  std::vector<double> storage;  // the workspace (8-byte aligned); filled (EmuOptions::workspace_fill) before the run
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
