# Correct control: softmax as exp(d - logsumexp(d)) with d = x - max(x); must pass every gate. (The shorter
# exp(x - logsumexp(x)) rounds logsumexp, a value as large as the inputs, to fp32: at inputs x 1e2 that costs
# about u |max x|, up to 8x the oracle gate's bound, which the task's own max-subtracting reference meets;
# tests/python/test_kernelbench.py keeps that form, in numpy, as an open question.)
from . import CANDIDATE_HEAD

TASK = "softmax"
EXPECT: set = set()
CANDIDATE = CANDIDATE_HEAD + '''class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        d = x - x.amax(dim=1, keepdim=True)
        return torch.exp(d - torch.logsumexp(d, dim=1, keepdim=True))
'''
