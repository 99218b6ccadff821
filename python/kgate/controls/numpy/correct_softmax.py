# Correct control: a row softmax computed with a log-sum-exp, exp((x - max) - log(sum(exp(x - max)))); must
# pass every gate. (The shorter exp(x - logsumexp(x)) rounds logsumexp, a value as large as the inputs, to
# fp32: at inputs x 1e2 that costs about u |max x|, up to 8x the oracle gate's bound, which the task's own
# max-subtracting reference meets; tests/python/test_kernelbench.py keeps that form as an open question.)
from . import CANDIDATE_BASE

TASK = "softmax"
EXPECT: set = set()
CANDIDATE = CANDIDATE_BASE + '''
    def __init__(self):
        pass

    def forward(self, x):
        d = x - x.max(axis=1, keepdims=True)
        return np.exp(d - np.log(np.exp(d).sum(axis=1, keepdims=True))).astype(np.float32)
'''
