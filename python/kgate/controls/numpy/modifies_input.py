# Broken control: writes its result into its input as well (modifies the caller's tensor); the
# immutability gate must catch it.
from . import CANDIDATE_BASE

TASK = "tanh_scale"
EXPECT = {"immutability"}
CANDIDATE = CANDIDATE_BASE + '''
    def __init__(self, alpha):
        self.alpha = alpha

    def forward(self, x):
        np.tanh(x, out=x)
        return (x * self.alpha).astype(np.float32)
'''
