# Broken control: adds one-ulp noise drawn from the OS on every call (results differ run to run); the
# determinism gate must catch it.
from . import CANDIDATE_BASE

TASK = "tanh_scale"
EXPECT = {"determinism"}
CANDIDATE = CANDIDATE_BASE + '''
    def __init__(self, alpha):
        self.alpha = alpha

    def forward(self, x):
        import os
        y = (np.tanh(x) * self.alpha).astype(np.float32)
        flip = np.frombuffer(os.urandom(y.size), dtype=np.uint8).reshape(y.shape) & 1
        return (y.view(np.uint32) ^ flip.astype(np.uint32)).view(np.float32)
'''
