# Broken control: adds each row's elements one by one into a float16 running sum (stalls near 2048); the
# accumulation gate must catch it.
from . import CANDIDATE_HEAD

TASK = "rowsum"
EXPECT = {"accumulation"}
CANDIDATE = CANDIDATE_HEAD + '''class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h = x.half()
        s = torch.zeros(x.shape[0], 1, dtype=torch.half, device=x.device)
        for j in range(x.shape[1]):
            s = s + h[:, j:j + 1]
        return s.float()
'''
