# Correct control: a matmul against the weight built under the same seed; must pass every gate.
from . import CANDIDATE_BASE

TASK = "linear"
EXPECT: set = set()
CANDIDATE = CANDIDATE_BASE + '''
    def __init__(self, in_features, out_features):
        self.weight = (np.random.randn(out_features, in_features) / np.sqrt(in_features)).astype(np.float32)

    def forward(self, x):
        return np.einsum("bi,oi->bo", x, self.weight).astype(np.float32)
'''
