# Broken control: softsign x / (1 + |x|) with +-Inf mapped to +-1 (its limit), where the task's own
# x / (1 + |x|) is Inf / Inf = NaN: a finite value where the float64 oracle is NaN (the indeterminate
# form), exact everywhere else. The inf gate must report it as its own labelled class.
from . import CANDIDATE_HEAD

TASK = "softsign"
EXPECT = {"inf"}
CANDIDATE = CANDIDATE_HEAD + '''class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.where(torch.isinf(x), torch.sign(x), x / (1 + torch.abs(x)))
'''
