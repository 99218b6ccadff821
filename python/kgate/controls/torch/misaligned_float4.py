# Broken control: a load_inline CUDA kernel that reads its input as float4 and launches on the legacy default
# stream (assumes 16-byte alignment; ignores the caller's stream); the layout gate must catch the misaligned
# input (a crash) and the stream gate the race. It also exercises the compile phase and its cache.
from . import CANDIDATE_HEAD

TASK = "tanh_scale"
EXPECT = {"layout", "stream"}
CANDIDATE = CANDIDATE_HEAD + '''from torch.utils.cpp_extension import load_inline

_src = r"""
#include <torch/extension.h>
__global__ void tanh_scale4(const float4* x, float4* y, float a, long n4) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n4) { float4 v = x[i]; y[i] = make_float4(tanhf(v.x) * a, tanhf(v.y) * a, tanhf(v.z) * a, tanhf(v.w) * a); }
}
torch::Tensor run(torch::Tensor x, double a) {
  auto y = torch::empty_like(x);
  long n4 = x.numel() / 4;
  tanh_scale4<<<(n4 + 255) / 256, 256>>>((const float4*)x.data_ptr<float>(), (float4*)y.data_ptr<float>(), (float)a, n4);
  return y;
}
"""
_ext = load_inline(name="kgate_control_float4", cpp_sources="torch::Tensor run(torch::Tensor x, double a);",
                   cuda_sources=_src, functions=["run"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return _ext.run(x, self.alpha)
'''
