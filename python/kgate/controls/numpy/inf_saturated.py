# Broken control: an exp-free softmax that clamps its inputs to [-1e4, 1e4] (saturates Inf); the inf gate
# must catch it.
from . import CANDIDATE_BASE

TASK = "softmax"
EXPECT = {"inf"}
CANDIDATE = CANDIDATE_BASE + '''
    def __init__(self):
        pass

    def forward(self, x):
        x = np.clip(x, -1e4, 1e4)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
'''
