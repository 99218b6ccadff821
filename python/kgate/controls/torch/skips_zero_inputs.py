# Broken control: skips the elements whose input is exactly zero (tanh(0) * a is 0) and relies on the
# freshly allocated output holding zeros there; randn inputs almost never hold an exact zero. The coverage
# gate must catch it: inputs with exact zeros, outputs from poisoned memory.
from . import CANDIDATE_HEAD

TASK = "tanh_scale"
EXPECT = {"coverage"}
CANDIDATE = CANDIDATE_HEAD + '''from torch.utils.cpp_extension import load_inline

_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void tanh_scale_nonzero(const float* x, float* y, float a, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n && x[i] != 0.f) y[i] = tanhf(x[i]) * a;
}
torch::Tensor run(torch::Tensor x, double a) {
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  long n = xc.numel();
  tanh_scale_nonzero<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      xc.data_ptr<float>(), y.data_ptr<float>(), (float)a, n);
  return y;
}
"""
_ext = load_inline(name="kgate_control_skips_zero", cpp_sources="torch::Tensor run(torch::Tensor x, double a);",
                   cuda_sources=_src, functions=["run"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return _ext.run(x, self.alpha)
'''
