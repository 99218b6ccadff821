# Broken control: the sum of all 256 x 4096 elements to one scalar, accumulated pairwise in fp16 (every
# partial sum rounded to half): right to allclose(1e-2) on randn inputs, Inf once the partial sums pass
# 65504 (all-ones inputs sum to 1048576). The accumulation gate must find the reduction to a scalar and
# catch it.
from . import CANDIDATE_BASE

TASK = "sum_all"
EXPECT = {"accumulation"}
CANDIDATE = CANDIDATE_BASE + '''
    def __init__(self):
        pass

    def forward(self, x):
        h = x.reshape(-1).astype(np.float16)
        with np.errstate(over="ignore"):
            while h.size > 1:
                if h.size % 2:
                    h = np.concatenate([h, np.zeros(1, np.float16)])
                h = h[0::2] + h[1::2]  # each partial sum rounded to fp16
        return h.reshape(()).astype(np.float32)
'''
