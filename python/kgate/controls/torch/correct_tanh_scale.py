# Correct control: tanh(x) * alpha through torch ops on the current stream; must pass every gate.
from . import CANDIDATE_HEAD

TASK = "tanh_scale"
EXPECT: set = set()
CANDIDATE = CANDIDATE_HEAD + '''class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return torch.mul(torch.tanh(x), self.alpha)
'''
