# Broken control: softsign as sign(x) * (1 - 1 / (1 + |x|)), algebraically x / (1 + |x|) but 1.0 at
# x = +Inf where the task's own x / (1 + |x|) is Inf / Inf = NaN: a finite value where the float64 oracle
# is NaN (the indeterminate form). The inf gate must report it as its own labelled class.
from . import CANDIDATE_HEAD

TASK = "softsign"
EXPECT = {"inf"}
CANDIDATE = CANDIDATE_HEAD + '''class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sign(x) * (1 - 1 / (1 + torch.abs(x)))
'''
