# Broken control: caches its result keyed on the input's pointer, shape and first element, and returns the
# cached copy when a call matches (stale when new values arrive in the same buffer with the same first
# element). The freshness gate must catch it.
from . import CANDIDATE_HEAD

TASK = "tanh_scale"
EXPECT = {"freshness"}
CANDIDATE = CANDIDATE_HEAD + '''class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha
        self.cache = {}

    def forward(self, x):
        key = (x.data_ptr(), tuple(x.shape), x.reshape(-1)[0].item() if x.numel() else None)
        if key not in self.cache:
            self.cache[key] = torch.tanh(x) * self.alpha
        return self.cache[key].clone()
'''
