"""The pure-PyTorch reference recurrence (the training comparison's other side) against the float64 oracle:
in float64 it is the same recurrence (outputs and autograd gradients to rounding); in float32 it carries
only float32 rounding."""
import pytest
import torch

from conftest import SHAPES, make_problem, op_args, rel
from glr.reference import recurrence_reference


def run_reference(p, **kw):
    return recurrence_reference(p["q"], p["k"], p["v"], p["g"], p["beta"], initial_state=p["initial_state"],
                                output_final_state=True, cu_seqlens=p["cu_seqlens"], **kw)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(str(x) for x in s[:6]) + ("-varlen" if s[6] else ""))
def test_reference_float64_is_the_oracle(member, shape):
    B, T, H, HV, K, V, cu = shape
    p = make_problem(member, B, T, H, HV, K, V, cu, initial_state=True, requires_grad=True)
    o, ht = run_reference(p)
    o_ref, ht_ref = torch.ops.glr.oracle_fwd(*op_args(p), True)
    assert rel(o, o_ref) < 1e-12 and rel(ht, ht_ref) < 1e-12
    dout, dht = torch.randn_like(o), torch.randn_like(ht)
    names = [n for n in ("q", "k", "v", "g", "beta", "initial_state") if p[n] is not None]
    got = torch.autograd.grad([o, ht], [p[n] for n in names], [dout, dht])
    want = [w for w in torch.ops.glr.oracle_bwd(*op_args(p)[:7], dout, dht, *op_args(p)[7:]) if w.numel() > 0]
    for n, a, b in zip(names, got, want):
        assert rel(a, b) < 1e-10, n


def test_reference_float32_within_float32_rounding(member):
    p64 = make_problem(member, 2, 100, 2, 4, 8, 8, seed=5, initial_state=True)
    p32 = {n: (t.float() if isinstance(t, torch.Tensor) and t.is_floating_point() else t) for n, t in p64.items()}
    o, ht = run_reference(p32)
    o_ref, ht_ref = torch.ops.glr.oracle_fwd(*op_args(p64), True)
    assert o.dtype == torch.float32
    assert rel(o, o_ref) < 1e-5 and rel(ht, ht_ref) < 1e-5


def test_reference_detects_a_wrong_member():
    """Guard against a check that cannot fail: the delta term changes the output."""
    p = make_problem("gdn", 1, 40, 1, 1, 4, 4, seed=6)
    o, _ = run_reference(dict(p, beta=None))
    o_ref, _ = torch.ops.glr.oracle_fwd(*op_args(p), False)
    assert rel(o, o_ref) > 1e-2
