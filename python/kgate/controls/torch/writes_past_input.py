# Broken control: writes four elements just past the end of its input (an out-of-bounds write); the bounds
# gate must catch it.
from . import CANDIDATE_HEAD

TASK = "tanh_scale"
EXPECT = {"bounds"}
CANDIDATE = CANDIDATE_HEAD + '''class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        y = torch.tanh(x) * self.alpha
        n = x.numel()
        tail = torch.as_strided(x, (4,), (1,), x.storage_offset() + n)
        tail.fill_(0)
        return y
'''
