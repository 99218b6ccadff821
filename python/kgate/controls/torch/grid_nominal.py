# Broken control: the grid and the bound check are hard-coded to the nominal shape (64 x 4096): at a
# smaller shape the values are right but the kernel reads past its input and writes past the output it
# allocated itself. The bounds gate must catch the writes (guard allocator) at the shapes the shapes gate
# sweeps.
from . import CANDIDATE_HEAD

TASK = "tanh_scale"
EXPECT = {"bounds"}
CANDIDATE = CANDIDATE_HEAD + '''from torch.utils.cpp_extension import load_inline

_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
constexpr long kNominal = 64L * 4096L;
__global__ void tanh_scale_nominal(const float* x, float* y, float a) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < kNominal) y[i] = tanhf(x[i]) * a;
}
torch::Tensor run(torch::Tensor x, double a) {
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  tanh_scale_nominal<<<(kNominal + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      xc.data_ptr<float>(), y.data_ptr<float>(), (float)a);
  return y;
}
"""
_ext = load_inline(name="kgate_control_grid_nominal", cpp_sources="torch::Tensor run(torch::Tensor x, double a);",
                   cuda_sources=_src, functions=["run"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return _ext.run(x, self.alpha)
'''
