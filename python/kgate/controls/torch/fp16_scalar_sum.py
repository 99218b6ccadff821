# Broken control: the sum of all 256 x 4096 elements to one scalar, accumulated pairwise in fp16 (every
# partial sum rounded to half): right to allclose(1e-2) on randn inputs, Inf once the partial sums pass
# 65504 (all-ones inputs sum to 1048576). The accumulation gate must find the reduction to a scalar and
# catch it.
from . import CANDIDATE_HEAD

TASK = "sum_all"
EXPECT = {"accumulation"}
CANDIDATE = CANDIDATE_HEAD + '''class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h = x.reshape(-1).half()
        while h.numel() > 1:
            if h.numel() % 2:
                h = torch.cat([h, h.new_zeros(1)])
            h = h[0::2] + h[1::2]  # each partial sum rounded to fp16
        return h.reshape(()).float()
'''
