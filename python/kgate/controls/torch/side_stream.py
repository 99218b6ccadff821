# Broken control: computes on a stream of its own that does not wait for the caller's stream (races with
# the caller); the stream gate must catch it.
from . import CANDIDATE_HEAD

TASK = "tanh_scale"
EXPECT = {"stream"}
CANDIDATE = CANDIDATE_HEAD + '''class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha
        self.side = None

    def forward(self, x):
        if self.side is None:
            self.side = torch.cuda.Stream()
        with torch.cuda.stream(self.side):
            y = torch.tanh(x) * self.alpha
        return y
'''
