# Broken control: writes one byte just past the end of its input's memory (an out-of-bounds write); the
# bounds gate must catch it.
from . import CANDIDATE_BASE

TASK = "tanh_scale"
EXPECT = {"bounds"}
CANDIDATE = CANDIDATE_BASE + '''
    def __init__(self, alpha):
        self.alpha = alpha

    def forward(self, x):
        import ctypes
        end = x.__array_interface__["data"][0] + x.nbytes
        ctypes.memset(end + 8, 0, 1)
        return (np.tanh(x) * self.alpha).astype(np.float32)
'''
