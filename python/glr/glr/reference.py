"""A pure-PyTorch recurrence of the whole family, token by token: the reference the training command
compares glr's operator with (--impl reference), and the thing a reader can check against the formula.

    S_t = exp(g_t) S_{t-1};  if beta: S_t += beta_t k_t (v_t - S_t^T k_t)^T  else: S_t += k_t v_t^T;
    o_t = scale * S_t^T q_t

Arguments as glr.recurrence (layouts of flash-linear-attention). Computes in float32 (float64 for
float64 inputs) and returns o in v's dtype and the final state in the compute dtype. Differentiable by
autograd; slow (a Python loop over tokens), which is why it is a reference.
"""
import math
from typing import Optional

import torch


def _loop(q, k, v, g, beta, scale, S):
    """One batch of sequences of equal length: q, k [B, T, HV, K] (already expanded to value heads),
    v [B, T, HV, V], g [B, T, HV] or None, beta [B, T, HV] or None, S [B, HV, K, V]."""
    outs = []
    for t in range(q.shape[1]):
        if g is not None:
            S = S * torch.exp(g[:, t]).unsqueeze(-1).unsqueeze(-1)
        kt = k[:, t]
        if beta is not None:
            read = torch.einsum("bhkv,bhk->bhv", S, kt)
            u = beta[:, t].unsqueeze(-1) * (v[:, t] - read)
        else:
            u = v[:, t]
        S = S + kt.unsqueeze(-1) * u.unsqueeze(-2)
        outs.append(scale * torch.einsum("bhkv,bhk->bhv", S, q[:, t]))
    o = torch.stack(outs, dim=1) if outs else v.new_zeros(v.shape)
    return o, S


def recurrence_reference(q, k, v, g=None, beta=None, scale: Optional[float] = None, initial_state=None,
                         output_final_state: bool = False, cu_seqlens=None):
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    group = HV // H
    scale = 1.0 / math.sqrt(K) if scale is None else float(scale)
    ct = torch.float64 if q.dtype == torch.float64 else torch.float32
    qx = q.to(ct).repeat_interleave(group, dim=2)
    kx = k.to(ct).repeat_interleave(group, dim=2)
    vx = v.to(ct)
    gx = None
    if g is not None:
        gx = g.to(ct).expand(B, T, HV) if g.dim() == 1 else g.to(ct)
    bx = None if beta is None else beta.to(ct)
    if cu_seqlens is None:
        S0 = initial_state.to(ct) if initial_state is not None else vx.new_zeros(B, HV, K, V)
        o, S = _loop(qx, kx, vx, gx, bx, scale, S0)
        return o.to(v.dtype), (S if output_final_state else None)
    offsets = [int(x) for x in cu_seqlens.tolist()]
    outs, states = [], []
    for n in range(len(offsets) - 1):
        a, b = offsets[n], offsets[n + 1]
        S0 = initial_state[n:n + 1].to(ct) if initial_state is not None else vx.new_zeros(1, HV, K, V)
        sl = slice(a, b)
        o, S = _loop(qx[:, sl], kx[:, sl], vx[:, sl], None if gx is None else gx[:, sl],
                     None if bx is None else bx[:, sl], scale, S0)
        outs.append(o)
        states.append(S)
    o = torch.cat(outs, dim=1) if outs else vx.new_zeros(1, 0, HV, V)
    return o.to(v.dtype), (torch.cat(states, dim=0) if output_final_state else None)
