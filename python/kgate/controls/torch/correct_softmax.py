# Correct control: softmax as exp(d - logsumexp(d)) with d = x - max(x); must pass every gate. (The shorter
# exp(x - logsumexp(x)) passes too since the oracle gate's magnitude term: docs/audit.md, "Two policy decisions".)
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
