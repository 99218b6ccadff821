# Correct control: a row softmax computed with a log-sum-exp, exp((x - max) - log(sum(exp(x - max)))); must
# pass every gate. (The shorter exp(x - logsumexp(x)) passes too: docs/audit.md, "Two policy decisions".)
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
