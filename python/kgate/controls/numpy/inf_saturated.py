# Broken control: a matmul that clamps its input to [-1e4, 1e4] first (saturates Inf): an Inf in a row of x
# makes every output of that row an unambiguous signed Inf, which comes out finite; the inf gate must catch it.
# (A clamped softmax would not do: at +Inf softmax has no value, and the clamp returns its limit.)
from . import CANDIDATE_BASE

TASK = "linear"
EXPECT = {"inf"}
CANDIDATE = CANDIDATE_BASE + '''
    def __init__(self, in_features, out_features):
        self.weight = (np.random.randn(out_features, in_features) / np.sqrt(in_features)).astype(np.float32)

    def forward(self, x):
        x = np.clip(x, -1e4, 1e4)
        return np.einsum("bi,oi->bo", x, self.weight).astype(np.float32)
'''
