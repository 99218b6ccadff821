# Broken control: replaces NaN with 0 in the output (masks NaN); the nan gate must catch it.
from . import CANDIDATE_BASE

TASK = "tanh_scale"
EXPECT = {"nan"}
CANDIDATE = CANDIDATE_BASE + '''
    def __init__(self, alpha):
        self.alpha = alpha

    def forward(self, x):
        y = np.tanh(x) * self.alpha
        return np.where(np.isnan(y), 0, y).astype(np.float32)
'''
