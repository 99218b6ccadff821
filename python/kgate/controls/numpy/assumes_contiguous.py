# Broken control: reinterprets its input's memory as if it were contiguous (a hidden stride assumption),
# silently wrong on strided inputs; the layout gate must catch it.
from . import CANDIDATE_BASE

TASK = "tanh_scale"
EXPECT = {"layout"}
CANDIDATE = CANDIDATE_BASE + '''
    def __init__(self, alpha):
        self.alpha = alpha

    def forward(self, x):
        flat = np.lib.stride_tricks.as_strided(x, shape=x.shape, strides=(x.shape[1] * 4, 4))
        return (np.tanh(flat) * self.alpha).astype(np.float32)
'''
