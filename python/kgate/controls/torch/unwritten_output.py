# Broken control: allocates its output with torch.empty and writes only the first half of each row (the rest
# is whatever the allocator held); the coverage gate must catch it. The producer's test rejects it too (the
# last column is whatever memory held: 10 of 10 H200 runs failed allclose), so it is not the field-missed form
# of the defect: skips_zero_inputs is (it relies on zeroed memory only where the input is exactly zero).
from . import CANDIDATE_HEAD

TASK = "tanh_scale"
EXPECT = {"coverage"}
PRODUCER_PASSES = False  # the field's allclose sees the unwritten column
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
