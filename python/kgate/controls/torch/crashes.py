# Broken control: kills its own process with SIGSEGV on the first call; it must cost one verdict (CRASH),
# never the audit.
from . import CANDIDATE_HEAD

TASK = "tanh_scale"
EXPECT = {"oracle"}
PRODUCER_PASSES = False  # a status, not a defect the field's test misses
CANDIDATE = CANDIDATE_HEAD + '''class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()

    def forward(self, x):
        import os, signal
        os.kill(os.getpid(), signal.SIGSEGV)
'''
