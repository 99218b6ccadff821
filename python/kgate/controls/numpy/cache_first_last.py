# Broken control: caches its result keyed on the input's address, shape, first and last elements, and
# returns the cached copy when a call matches: stale when new values arrive in the same buffer differing only
# inside (neither another draw, which changes the first element, nor a new tail catches it). The freshness
# gate must catch it with its input that differs from the last one in one middle element.
from . import CANDIDATE_BASE

TASK = "tanh_scale"
EXPECT = {"freshness"}
CANDIDATE = CANDIDATE_BASE + '''
    def __init__(self, alpha):
        self.alpha = alpha
        self.cache = {}

    def forward(self, x):
        flat = x.reshape(-1)
        ends = (float(flat[0]), float(flat[-1])) if x.size else None
        key = (x.__array_interface__["data"][0], x.shape, ends)
        if key not in self.cache:
            self.cache[key] = (np.tanh(x) * self.alpha).astype(np.float32)
        return self.cache[key].copy()
'''
