# Correct control: nn.Linear rewritten as addmm with the same seeded weights; must pass every gate.
from . import CANDIDATE_HEAD

TASK = "linear"
EXPECT: set = set()
CANDIDATE = CANDIDATE_HEAD + '''class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.addmm(self.fc.bias, x, self.fc.weight.t())
'''
