# Broken control: computes tanh in place in the caller's input; the immutability gate must catch it.
from . import CANDIDATE_HEAD

TASK = "tanh_scale"
EXPECT = {"immutability"}
CANDIDATE = CANDIDATE_HEAD + '''class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return x.tanh_() * self.alpha
'''
