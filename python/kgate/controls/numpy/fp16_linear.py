# Broken control: the linear layer computed in float16 (input and weight rounded to half, as the task's own
# fp16 reference run does): right to allclose(1e-2) on the task's randn inputs (error ~1e-3), hundreds of
# times the fp32 bound. The oracle gate must catch it and label it with the precision it matches (fp16).
from . import CANDIDATE_BASE

TASK = "linear"
EXPECT = {"oracle"}
PRECISION = "fp16"
CANDIDATE = CANDIDATE_BASE + '''
    def __init__(self, in_features, out_features):
        self.weight = (np.random.randn(out_features, in_features) / np.sqrt(in_features)).astype(np.float32)

    def forward(self, x):
        return (x.astype(np.float16) @ self.weight.astype(np.float16).T).astype(np.float32)
'''
