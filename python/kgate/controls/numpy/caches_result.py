# Broken control: computes once per input buffer address and returns the cached result afterwards (stale
# results when the caller reuses its buffers); the freshness gate must catch it.
from . import CANDIDATE_BASE

TASK = "tanh_scale"
EXPECT = {"freshness"}
# Not asserted either way: the producer's five trials rebind their inputs, so trial 3's array may be allocated
# where trial 1's was just freed and hit this cache (the field's test then fails it, "trial 3: value mismatch"),
# or may not; which depends on the allocator, not on the candidate. cache_first_element and cache_first_last are
# the pointer-keyed caches that pass the producer's test by construction (their key holds input values).
PRODUCER_PASSES = False
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
