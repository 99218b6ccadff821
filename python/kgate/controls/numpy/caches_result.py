# Broken control: computes once per input buffer address and returns the cached result afterwards (stale
# results when the caller reuses its buffers); the freshness gate must catch it.
from . import CANDIDATE_BASE

TASK = "tanh_scale"
EXPECT = {"freshness"}
CANDIDATE = CANDIDATE_BASE + '''
    def __init__(self, alpha):
        self.alpha = alpha
        self.cache = {}

    def forward(self, x):
        key = (x.__array_interface__["data"][0], x.shape)
        if key not in self.cache:
            self.cache[key] = (np.tanh(x) * self.alpha).astype(np.float32)
        return self.cache[key].copy()
'''
