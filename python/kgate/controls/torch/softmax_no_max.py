# Broken control: softmax as exp(x) / sum(exp(x)) without subtracting the row maximum: exact on randn
# inputs, NaN once an input passes about 88 (exp overflows in fp32) where the task's own fp32 softmax is
# still finite. The oracle gate must catch it in its magnitude sweep.
from . import CANDIDATE_HEAD

TASK = "softmax"
EXPECT = {"oracle"}
CANDIDATE = CANDIDATE_HEAD + '''class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        e = torch.exp(x)
        return e / e.sum(dim=1, keepdim=True)
'''
