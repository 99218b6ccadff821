# Broken control: nn.Linear on its input clamped to [-1e4, 1e4] (saturates Inf): an Inf in a row of x makes
# every output of that row an unambiguous signed Inf, which comes out finite; the inf gate must catch it.
# (A clamped softmax would not do: at +Inf softmax has no value, and the clamp returns its limit.)
from . import CANDIDATE_HEAD

TASK = "linear"
EXPECT = {"inf"}
CANDIDATE = CANDIDATE_HEAD + '''class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return self.fc(torch.clamp(x, -1e4, 1e4))
'''
