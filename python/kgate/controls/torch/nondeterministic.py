# Broken control: flips the lowest bit of random output elements, from a generator seeded by the OS
# (results differ run to run); the determinism gate must catch it.
from . import CANDIDATE_HEAD

TASK = "tanh_scale"
EXPECT = {"determinism"}
CANDIDATE = CANDIDATE_HEAD + '''class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        import os
        y = torch.tanh(x) * self.alpha
        g = torch.Generator(device=y.device).manual_seed(int.from_bytes(os.urandom(4), "little"))
        flip = torch.randint(0, 2, y.shape, generator=g, device=y.device, dtype=torch.int32)
        return (y.view(torch.int32) ^ flip).view(torch.float32)
'''
