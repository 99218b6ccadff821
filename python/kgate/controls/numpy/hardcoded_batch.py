# Broken control: hard-codes the nominal batch size (16) in its reshape, so other batch sizes come out
# wrong or raise; the shapes gate must catch it.
from . import CANDIDATE_BASE

TASK = "tanh_scale"
EXPECT = {"shapes"}
CANDIDATE = CANDIDATE_BASE + '''
    def __init__(self, alpha):
        self.alpha = alpha

    def forward(self, x):
        rows = np.resize(x, (16, x.shape[1]))[: x.shape[0]]
        out = np.tanh(rows) * self.alpha
        if x.shape[0] != 16:
            out = out * 0
        return out.astype(np.float32)
'''
