"""Shared inputs for the glr PyTorch tests: fresh random problems of every family member."""
import math

import pytest
import torch

import glr

GATE = {"gdn": 1, "deltanet": 0, "mamba2": 1, "retnet": 2, "linear": 0}


def make_problem(member, B, T, H, HV, K, V, cu_seqlens=None, initial_state=False, dtype=torch.float64,
                 seed=None, requires_grad=False):
    """A dict of inputs for glr.recurrence: normalised keys, gates log-sigmoid of N(2, 1), beta in (0, 1)."""
    gen = torch.Generator().manual_seed(seed if seed is not None else torch.randint(0, 2**31, (1,)).item())
    delta, gate = glr.MEMBERS[member]
    N = B if cu_seqlens is None else len(cu_seqlens) - 1

    def rnd(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    p = {
        "q": rnd(B, T, H, K),
        "k": torch.nn.functional.normalize(rnd(B, T, H, K), dim=-1),
        "v": rnd(B, T, HV, V),
        "g": None,
        "beta": None,
        "initial_state": rnd(N, HV, K, V) if initial_state else None,
        "cu_seqlens": None if cu_seqlens is None else torch.tensor(cu_seqlens, dtype=torch.long),
    }
    if gate == 1:
        p["g"] = torch.nn.functional.logsigmoid(rnd(B, T, HV) + 2.0)
    elif gate == 2:
        p["g"] = torch.nn.functional.logsigmoid(rnd(HV) + 3.0)
    if delta:
        p["beta"] = torch.sigmoid(rnd(B, T, HV))
    state_dtype = torch.float64 if dtype == torch.float64 else torch.float32
    for name in ("q", "k", "v", "g", "beta"):
        if p[name] is not None:
            p[name] = p[name].to(dtype).requires_grad_(requires_grad)
    if p["initial_state"] is not None:
        p["initial_state"] = p["initial_state"].to(state_dtype).requires_grad_(requires_grad)
    return p


def op_args(p, scale=None):
    """The positional arguments of torch.ops.glr.fwd / oracle_fwd for problem p (final_state appended)."""
    delta = p["beta"] is not None
    gate = 0 if p["g"] is None else (2 if p["g"].dim() == 1 else 1)
    s = 1.0 / math.sqrt(p["q"].shape[-1]) if scale is None else scale
    return [p["q"], p["k"], p["v"], p["g"], p["beta"], p["initial_state"], p["cu_seqlens"], s, delta, gate]


def rel(a, b):
    a, b = a.detach().double(), b.detach().double()
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


# (B, T, H, HV, K, V, cu_seqlens): several chunks with a short last one, GVA (HV = 2H, 3H), packed sequences
# with an empty one and chunk boundaries crossed inside a sequence.
SHAPES = [
    (2, 70, 2, 2, 8, 6, None),
    (1, 131, 2, 4, 5, 7, None),
    (3, 9, 1, 3, 4, 4, None),
    (1, 150, 1, 2, 6, 5, [0, 5, 69, 69, 150]),
    (1, 64, 2, 6, 3, 8, [0, 64]),
]


@pytest.fixture(params=sorted(GATE))
def member(request):
    return request.param
