# Broken control: never returns from its first call (a hanging kernel); it must cost one verdict (TIMEOUT)
# and never the audit.
from . import CANDIDATE_BASE

TASK = "tanh_scale"
EXPECT = {"oracle"}
PRODUCER_PASSES = False  # a status, not a defect the field's test misses
CANDIDATE = CANDIDATE_BASE + '''
    def __init__(self, alpha):
        self.alpha = alpha

    def forward(self, x):
        import threading
        threading.Event().wait()
'''
