# Correct control: softmax as exp(x - logsumexp(x)); must pass every gate.
from . import CANDIDATE_HEAD

TASK = "softmax"
EXPECT: set = set()
CANDIDATE = CANDIDATE_HEAD + '''class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.exp(x - torch.logsumexp(x, dim=1, keepdim=True))
'''
