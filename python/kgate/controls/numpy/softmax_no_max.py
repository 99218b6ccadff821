# Broken control: softmax as exp(x) / sum(exp(x)) without subtracting the row maximum: exact on randn
# inputs, NaN once an input passes about 88 (exp overflows in fp32) where the task's own fp32 softmax is
# still finite. The oracle gate must catch it in its magnitude sweep.
from . import CANDIDATE_BASE

TASK = "softmax"
EXPECT = {"oracle"}
CANDIDATE = CANDIDATE_BASE + '''
    def __init__(self):
        pass

    def forward(self, x):
        with np.errstate(over="ignore", invalid="ignore"):
            e = np.exp(x)
            return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
'''
