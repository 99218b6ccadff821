# Broken control: allocates its output with torch.empty and writes only the first half of each row (the rest
# is whatever the allocator held); the coverage gate must catch it.
from . import CANDIDATE_HEAD

TASK = "tanh_scale"
EXPECT = {"coverage"}
CANDIDATE = CANDIDATE_HEAD + '''class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        out = torch.empty_like(x)
        h = x.shape[1] - 1
        out[:, :h] = torch.tanh(x[:, :h]) * self.alpha
        return out
'''
