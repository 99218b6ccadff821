# Broken control: caches its result keyed on the input's address, shape and first element, and returns the
# cached copy when a call matches (stale when new values arrive in the same buffer with the same first
# element). The freshness gate must catch it.
from . import CANDIDATE_BASE

TASK = "tanh_scale"
EXPECT = {"freshness"}
CANDIDATE = CANDIDATE_BASE + '''
    def __init__(self, alpha):
        self.alpha = alpha
        self.cache = {}

    def forward(self, x):
        key = (x.__array_interface__["data"][0], x.shape, float(x.reshape(-1)[0]) if x.size else None)
        if key not in self.cache:
            self.cache[key] = (np.tanh(x) * self.alpha).astype(np.float32)
        return self.cache[key].copy()
'''
