# Broken control: hard-codes the nominal batch size (64): other batch sizes come out zero; the shapes gate
# must catch it.
from . import CANDIDATE_HEAD

TASK = "tanh_scale"
EXPECT = {"shapes"}
CANDIDATE = CANDIDATE_HEAD + '''class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        y = torch.tanh(x) * self.alpha
        return y if x.shape[0] == 64 else torch.zeros_like(y)
'''
