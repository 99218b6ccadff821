# Broken control: clamps the input to [-1e4, 1e4] before the softmax (saturates Inf); the inf gate must
# catch it.
from . import CANDIDATE_HEAD

TASK = "softmax"
EXPECT = {"inf"}
CANDIDATE = CANDIDATE_HEAD + '''class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(torch.clamp(x, -1e4, 1e4), dim=1)
'''
