# Broken control: caches its result by input address (stale results when the caller reuses its buffers);
# the freshness gate must catch it.
from . import CANDIDATE_HEAD

TASK = "tanh_scale"
EXPECT = {"freshness"}
# Not asserted either way (as the numpy twin): trial 3's inputs may reuse trial 1's freed block in the caching
# allocator and hit this cache, or not; cache_first_element passes the producer's test by construction.
PRODUCER_PASSES = False
CANDIDATE = CANDIDATE_HEAD + '''class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha
        self.cache = {}

    def forward(self, x):
        key = (x.data_ptr(), tuple(x.shape))
        if key not in self.cache:
            self.cache[key] = torch.tanh(x) * self.alpha
        return self.cache[key].clone()
'''
