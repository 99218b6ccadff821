# Correct control: a row softmax computed with a log-sum-exp; must pass every gate.
from . import CANDIDATE_BASE

TASK = "softmax"
EXPECT: set = set()
CANDIDATE = CANDIDATE_BASE + '''
    def __init__(self):
        pass

    def forward(self, x):
        m = x.max(axis=1, keepdims=True)
        lse = m + np.log(np.exp(x - m).sum(axis=1, keepdims=True))
        return np.exp(x - lse).astype(np.float32)
'''
