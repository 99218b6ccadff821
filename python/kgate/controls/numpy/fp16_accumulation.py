# Broken control: sums each row of 65536 elements pairwise in float16 (every partial sum rounded to half):
# right to allclose(1e-2) on the task's rand inputs (the row sums, near 32768, stay below fp16's 65504), Inf
# once a row's sum passes 65504 (131072 ones at the accumulation gate's large size). The accumulation gate
# must catch it. (A running fp16 total instead stalls at 2048, 1.3% off these rows: the producer's test and
# the oracle gate would catch that first, and the engine counts a finding of the same magnitude once, under
# oracle.)
from . import CANDIDATE_BASE

TASK = "rowsum"
EXPECT = {"accumulation"}
CANDIDATE = CANDIDATE_BASE + '''
    def __init__(self):
        pass

    def forward(self, x):
        h = x.astype(np.float16)
        with np.errstate(over="ignore"):
            while h.shape[1] > 1:
                if h.shape[1] % 2:
                    h = np.concatenate([h, np.zeros((h.shape[0], 1), np.float16)], axis=1)
                h = h[:, 0::2] + h[:, 1::2]  # each partial sum rounded to fp16
        return h.astype(np.float32)
'''
