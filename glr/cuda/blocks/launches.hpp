// glr/cuda/blocks/launches.hpp: the two compiled pipelines (float working type), one translation unit each
// so the two halves build in parallel. Host code only: callers need no CUDA compiler.
#pragma once

#include "../common/problem.hpp"

typedef struct CUstream_st* cudaStream_t;

namespace glr::cuda {

void launch_forward(const Problem& p, const Work<float>& w, cudaStream_t stream);
void launch_backward(const Problem& p, const Work<float>& w, cudaStream_t stream);

}  // namespace glr::cuda
