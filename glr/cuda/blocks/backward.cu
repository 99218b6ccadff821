// The backward pipeline for the GPU (the forward's stages recomputed, then the backward's), every (K, V).
#include "launch.cuh"
#include "launches.hpp"

namespace glr::cuda {

void launch_backward(const Problem& p, const Work<float>& w, cudaStream_t stream) {
  GpuRunner r{stream};
  dispatch_dims(p.K, p.V, [&](auto K, auto V) {
    backward_pipeline<float, decltype(K)::value, decltype(V)::value>(r, p, w);
  });
}

}  // namespace glr::cuda
