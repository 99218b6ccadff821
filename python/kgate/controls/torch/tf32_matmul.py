# Broken control: turns TF32 on for its matmul (a precision downgrade from the promised fp32); the oracle gate
# must catch it and name TF32.
from . import CANDIDATE_HEAD

TASK = "matmul"
EXPECT = {"oracle"}
CANDIDATE = CANDIDATE_HEAD + '''class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return torch.matmul(A, B)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old
'''
