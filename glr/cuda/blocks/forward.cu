// The forward pipeline for the GPU, every (K, V) the kernels take.
#include "launch.cuh"
#include "launches.hpp"

namespace glr::cuda {

void launch_forward(const Problem& p, const Work<float>& w, cudaStream_t stream) {
  GpuRunner r{stream};
  dispatch_dims(p.K, p.V, [&](auto K, auto V) {
    forward_pipeline<float, decltype(K)::value, decltype(V)::value>(r, p, w);
  });
}

}  // namespace glr::cuda
