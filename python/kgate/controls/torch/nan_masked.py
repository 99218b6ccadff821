# Broken control: torch.nan_to_num on the output (masks NaN); the nan gate must catch it.
from . import CANDIDATE_HEAD

TASK = "tanh_scale"
EXPECT = {"nan"}
CANDIDATE = CANDIDATE_HEAD + '''class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return torch.nan_to_num(torch.tanh(x) * self.alpha, nan=0.0)
'''
