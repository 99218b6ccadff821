# Correct control: tanh(x) * alpha, written differently from the task (no defect); must pass every gate.
from . import CANDIDATE_BASE

TASK = "tanh_scale"
EXPECT: set = set()
CANDIDATE = CANDIDATE_BASE + '''
    def __init__(self, alpha):
        self.alpha = np.float32(alpha)

    def forward(self, x):
        return (np.tanh(x) * self.alpha).astype(np.float32)
'''
