# Broken control: reads its input through contiguous strides whatever its real strides (a hidden layout
# assumption), silently wrong on strided inputs; the layout gate must catch it.
from . import CANDIDATE_HEAD

TASK = "tanh_scale"
EXPECT = {"layout"}
CANDIDATE = CANDIDATE_HEAD + '''class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        flat = torch.as_strided(x, x.shape, (x.shape[1], 1))
        return torch.tanh(flat) * self.alpha
'''
