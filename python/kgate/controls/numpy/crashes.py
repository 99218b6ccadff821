# Broken control: kills its own process with SIGSEGV on the first call (a crashing kernel); it must cost
# one verdict (CRASH) and never the audit.
from . import CANDIDATE_BASE

TASK = "tanh_scale"
EXPECT = {"oracle"}
PRODUCER_PASSES = False  # a status, not a defect the field's test misses
CANDIDATE = CANDIDATE_BASE + '''
    def __init__(self, alpha):
        self.alpha = alpha

    def forward(self, x):
        import os, signal
        os.kill(os.getpid(), signal.SIGSEGV)
'''
