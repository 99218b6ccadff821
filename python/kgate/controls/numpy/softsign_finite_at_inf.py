# Broken control: softsign x / (1 + |x|) with +-Inf mapped to +-1 (its limit), where the task's own
# x / (1 + |x|) is Inf / Inf = NaN: a finite value where the float64 oracle is NaN (the indeterminate
# form), exact everywhere else. The inf gate must report it as its own labelled class.
from . import CANDIDATE_BASE

TASK = "softsign"
EXPECT = {"inf"}
CANDIDATE = CANDIDATE_BASE + '''
    def __init__(self):
        pass

    def forward(self, x):
        with np.errstate(invalid="ignore"):
            return np.where(np.isinf(x), np.sign(x), x / (1 + np.abs(x))).astype(np.float32)
'''
