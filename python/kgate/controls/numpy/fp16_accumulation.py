# Broken control: sums each row sequentially in float16 (a sum of 4096 values stalls near 2048); the
# accumulation gate must catch it.
from . import CANDIDATE_BASE

TASK = "rowsum"
EXPECT = {"accumulation"}
CANDIDATE = CANDIDATE_BASE + '''
    def __init__(self):
        pass

    def forward(self, x):
        s = np.cumsum(x.astype(np.float16), axis=1, dtype=np.float16)[:, -1:]
        return s.astype(np.float32)
'''
