# Broken control: a CUDA kernel launched with one thread too many and no tail check writes one element past
# the end of the output it allocated itself (torch.empty_like); the values are right. The bounds gate must
# catch it through the guard allocator's zones around the candidate's own allocations (the caching
# allocator's rounding would hide it otherwise).
from . import CANDIDATE_HEAD

TASK = "tanh_scale"
EXPECT = {"bounds"}
CANDIDATE = CANDIDATE_HEAD + '''from torch.utils.cpp_extension import load_inline

_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void tanh_scale_plus_one(const float* x, float* y, float a, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = tanhf(x[i]) * a;
  else if (i == n) y[i] = 0.f;  // one past the end
}
torch::Tensor run(torch::Tensor x, double a) {
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  long n = xc.numel();
  tanh_scale_plus_one<<<(n + 1 + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      xc.data_ptr<float>(), y.data_ptr<float>(), (float)a, n);
  return y;
}
"""
_ext = load_inline(name="kgate_control_past_own_output", cpp_sources="torch::Tensor run(torch::Tensor x, double a);",
                   cuda_sources=_src, functions=["run"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return _ext.run(x, self.alpha)
'''
