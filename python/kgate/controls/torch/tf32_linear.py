# Broken control: nn.Linear with TF32 turned on for its GEMM (a precision downgrade from the promised fp32):
# right to allclose(1e-2) on the task's inputs (TF32 keeps fp16's 10-bit mantissa; outputs of order 0.5), far
# past the fp32 bound. The oracle gate must catch it and label it with the precision it matches (tf32).
# It replaces tf32_matmul, a 1024x2048x1024 randn matmul whose TF32 error (outputs of order 45) the producer's
# own test rejected in 10 of 10 H200 runs (results/h200-2026-12-04/controls-10-seeds-b): not a defect the
# field's test misses. A CPU emulation of TF32 rounding (operands rounded to a 10-bit mantissa) puts this
# task's error at 0.07 of allclose's bound over the producer's 5 trials, the old task's at 4.7; through the row
# job on the CPU the oracle gate failed the emulated form at 49x and 105x its bound (two seeds) and passed the
# fp32 form at 0.096x. Not yet run on a GPU.
from . import CANDIDATE_HEAD

TASK = "linear"
EXPECT = {"oracle"}
PRECISION = "tf32"
CANDIDATE = CANDIDATE_HEAD + '''class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return torch.addmm(self.fc.bias, x, self.fc.weight.t())
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old
'''
