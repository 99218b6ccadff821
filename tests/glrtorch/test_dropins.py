"""The flash-linear-attention-style drop-ins compute what their names promise, checked against the
reference recurrence (itself checked against the oracle in test_reference.py) and, for Mamba2's SSD scan,
against an independent token loop written in Mamba2's own variables."""
import math

import torch
import torch.nn.functional as F

import glr
from conftest import make_problem, rel
from glr.reference import recurrence_reference


def test_chunk_gated_delta_rule_with_l2norm():
    p = make_problem("gdn", 2, 70, 2, 4, 8, 8, seed=1, initial_state=True)
    q = p["q"] * 3  # not unit length: the flag must normalise
    o, ht = glr.chunk_gated_delta_rule(q, p["k"] * 2, p["v"], p["g"], p["beta"], initial_state=p["initial_state"],
                                       output_final_state=True, use_qk_l2norm_in_kernel=True)
    o_ref, ht_ref = recurrence_reference(F.normalize(q, dim=-1), F.normalize(p["k"], dim=-1), p["v"], p["g"],
                                         p["beta"], initial_state=p["initial_state"], output_final_state=True)
    assert rel(o, o_ref) < 1e-12 and rel(ht, ht_ref) < 1e-12


def test_chunk_delta_rule_and_varlen():
    p = make_problem("deltanet", 1, 90, 1, 2, 4, 4, [0, 30, 90], seed=2)
    o, ht = glr.chunk_delta_rule(p["q"], p["k"], p["v"], p["beta"], scale=0.3, output_final_state=True,
                                 cu_seqlens=p["cu_seqlens"])
    o_ref, ht_ref = recurrence_reference(p["q"], p["k"], p["v"], None, p["beta"], 0.3, output_final_state=True,
                                         cu_seqlens=p["cu_seqlens"])
    assert ht.shape == (2, 2, 4, 4)
    assert rel(o, o_ref) < 1e-12 and rel(ht, ht_ref) < 1e-12


def test_chunk_simple_gla_g_and_g_gamma():
    p = make_problem("mamba2", 2, 70, 2, 2, 4, 6, seed=3)
    o, _ = glr.chunk_simple_gla(p["q"], p["k"], p["v"], g=p["g"])
    assert rel(o, recurrence_reference(p["q"], p["k"], p["v"], p["g"])[0]) < 1e-12
    gamma = torch.log(torch.tensor([0.9, 0.99], dtype=torch.float64))
    o, _ = glr.chunk_simple_gla(p["q"], p["k"], p["v"], g_gamma=gamma)
    assert rel(o, recurrence_reference(p["q"], p["k"], p["v"], gamma)[0]) < 1e-12


def test_chunk_retention_uses_retnet_decays():
    p = make_problem("retnet", 1, 70, 3, 3, 4, 4, seed=4)
    o, _ = glr.chunk_retention(p["q"], p["k"], p["v"])
    gamma = torch.tensor([1 - 2.0 ** (-5 - h) for h in range(3)], dtype=torch.float64).log()
    assert rel(o, recurrence_reference(p["q"], p["k"], p["v"], gamma)[0]) < 1e-6


def test_chunk_linear_attn_normalize():
    p = make_problem("linear", 1, 50, 1, 1, 4, 4, seed=5)
    q, k = F.elu(p["q"]) + 1, F.elu(p["k"]) + 1
    o, _ = glr.chunk_linear_attn(q, k, p["v"], normalize=False)
    o_ref, _ = recurrence_reference(q, k, p["v"])
    assert rel(o, o_ref) < 1e-12
    o, _ = glr.chunk_linear_attn(q, k, p["v"], normalize=True)
    z = (q * 0.5 * k.cumsum(1)).sum(-1, keepdim=True)  # scale 1/sqrt(4)
    assert rel(o, o_ref / (z + 1e-5)) < 1e-12


def test_mamba_chunk_scan_combined_is_ssd():
    torch.manual_seed(6)
    b, l, h, p_, g_, n = 2, 70, 4, 3, 2, 5
    x = torch.randn(b, l, h, p_, dtype=torch.float64)
    dt = torch.randn(b, l, h, dtype=torch.float64)
    A = -torch.rand(h, dtype=torch.float64) - 0.5
    B = torch.randn(b, l, g_, n, dtype=torch.float64)
    C = torch.randn(b, l, g_, n, dtype=torch.float64)
    D = torch.randn(h, dtype=torch.float64)
    z = torch.randn(b, l, h, p_, dtype=torch.float64)
    dt_bias = torch.randn(h, dtype=torch.float64)
    h0 = torch.randn(b, h, p_, n, dtype=torch.float64)
    y, ht = glr.mamba_chunk_scan_combined(x, dt, A, B, C, 64, D=D, z=z, dt_bias=dt_bias, initial_states=h0,
                                          dt_softplus=True, return_final_states=True)
    # the SSD recurrence in Mamba2's variables: h_t = exp(dt A) h + dt x B^T, y = h C + D x, gated by silu(z)
    d = F.softplus(dt + dt_bias)
    state = h0.clone()  # [b, h, p, n]
    ys = []
    for t in range(l):
        Bt = B[:, t].repeat_interleave(h // g_, dim=1)  # [b, h, n]
        Ct = C[:, t].repeat_interleave(h // g_, dim=1)
        state = torch.exp(d[:, t] * A)[..., None, None] * state + \
            (d[:, t][..., None] * x[:, t])[..., None] * Bt[:, :, None, :]
        ys.append(torch.einsum("bhpn,bhn->bhp", state, Ct) + D[None, :, None] * x[:, t])
    y_ref = torch.stack(ys, 1) * F.silu(z)
    assert rel(y, y_ref) < 1e-12 and rel(ht, state) < 1e-12
    assert math.isfinite(y.abs().max().item())
