"""One nn.Module token mixer per family member, with the projections, short convolution and gates of the
published architectures, and a small language model around them (pre-norm blocks with a SwiGLU MLP).

Every mixer ends in one recurrence call, glr's operator (impl="glr") or the pure-PyTorch token loop
(impl="reference", glr.reference), so the same model with the same seed trains through either.

    gdn       Gated DeltaNet (Yang, Kautz, Hatamizadeh 2024; fla's GatedDeltaNet): q, k, v projections with a
              causal depthwise short convolution and SiLU, L2-normalised q and k, beta = sigmoid(W_b x),
              g = -exp(A_log) * softplus(W_a x + dt_bias), output RMSNorm gated by SiLU(W_g x).
    deltanet  DeltaNet (Yang et al. 2024; fla's DeltaNet defaults): as above without the decay and the
              output gate (output RMSNorm only).
    mamba2    Mamba2 (Dao, Gu 2024): one input projection to z, x, B, C, dt; short convolution with SiLU over
              x, B, C; dt = softplus(dt + dt_bias), A = -exp(A_log); the SSD scan (q = C, k = B, v = x dt,
              g = dt A, scale 1) plus D x; RMSNorm of y * SiLU(z).
    retnet    RetNet's multi-scale retention (Sun et al. 2023): rotary q and k, fixed decays
              gamma_h = 1 - 2^(-5-h), per-head RMSNorm (fla uses it for the paper's GroupNorm) gated by
              SiLU(W_g x).
    linear    linear attention (Katharopoulos et al. 2020): feature map elu(x) + 1 on q and k, no
              denominator, output RMSNorm (as fla's LinearAttention with normalisation off).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .ops import MEMBERS, recurrence, retention_log_decay
from .reference import recurrence_reference


def recurrence_fn(impl: str):
    if impl == "glr":
        return recurrence
    if impl == "reference":
        return recurrence_reference
    raise ValueError(f"glr: impl must be 'glr' or 'reference', got {impl!r}")


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


class ShortConv(nn.Module):
    """Causal depthwise convolution over time followed by SiLU: [B, T, C] -> [B, T, C]."""

    def __init__(self, channels: int, kernel: int = 4):
        super().__init__()
        self.conv = nn.Conv1d(channels, channels, kernel, groups=channels, padding=kernel - 1, bias=False)

    def forward(self, x):
        T = x.shape[1]
        return F.silu(self.conv(x.transpose(1, 2))[..., :T].transpose(1, 2))


def _inverse_softplus(x):
    return x + torch.log(-torch.expm1(-x))


def _dt_init(n: int, dt_min=1e-3, dt_max=1e-1):
    dt = torch.exp(torch.rand(n) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
    return _inverse_softplus(dt.clamp(min=1e-4))


class DeltaRuleMixer(nn.Module):
    """Gated DeltaNet (gated=True) and DeltaNet (gated=False)."""

    def __init__(self, d_model, num_heads, head_dim, impl="glr", gated=True, conv_size=4):
        super().__init__()
        self.h, self.dk, self.gated = num_heads, head_dim, gated
        self.rec = recurrence_fn(impl)
        inner = num_heads * head_dim
        self.q_proj = nn.Linear(d_model, inner, bias=False)
        self.k_proj = nn.Linear(d_model, inner, bias=False)
        self.v_proj = nn.Linear(d_model, inner, bias=False)
        self.b_proj = nn.Linear(d_model, num_heads, bias=False)
        self.q_conv, self.k_conv, self.v_conv = ShortConv(inner, conv_size), ShortConv(inner, conv_size), \
            ShortConv(inner, conv_size)
        if gated:
            self.a_proj = nn.Linear(d_model, num_heads, bias=False)
            self.A_log = nn.Parameter(torch.log(torch.empty(num_heads).uniform_(1, 16)))
            self.dt_bias = nn.Parameter(_dt_init(num_heads))
            self.g_proj = nn.Linear(d_model, inner, bias=False)
        self.o_norm = RMSNorm(head_dim)
        self.o_proj = nn.Linear(inner, d_model, bias=False)

    def forward(self, x):
        B, T, _ = x.shape
        q = F.normalize(self.q_conv(self.q_proj(x)).view(B, T, self.h, self.dk), p=2, dim=-1)
        k = F.normalize(self.k_conv(self.k_proj(x)).view(B, T, self.h, self.dk), p=2, dim=-1)
        v = self.v_conv(self.v_proj(x)).view(B, T, self.h, self.dk)
        beta = torch.sigmoid(self.b_proj(x).float())
        g = None
        if self.gated:
            g = -torch.exp(self.A_log.float()) * F.softplus(self.a_proj(x).float() + self.dt_bias)
        o, _ = self.rec(q, k, v, g, beta)
        o = self.o_norm(o)
        if self.gated:
            o = o * F.silu(self.g_proj(x).view(B, T, self.h, self.dk))
        return self.o_proj(o.reshape(B, T, -1))


class Mamba2Mixer(nn.Module):
    def __init__(self, d_model, num_heads, head_dim, impl="glr", d_state=None, conv_size=4):
        super().__init__()
        self.h, self.p = num_heads, head_dim
        self.n = d_state or head_dim
        self.rec = recurrence_fn(impl)
        inner = num_heads * head_dim
        self.in_proj = nn.Linear(d_model, 2 * inner + 2 * self.n + num_heads, bias=False)
        self.conv = ShortConv(inner + 2 * self.n, conv_size)
        self.A_log = nn.Parameter(torch.log(torch.empty(num_heads).uniform_(1, 16)))
        self.dt_bias = nn.Parameter(_dt_init(num_heads))
        self.D = nn.Parameter(torch.ones(num_heads))
        self.norm = RMSNorm(inner)
        self.out_proj = nn.Linear(inner, d_model, bias=False)

    def forward(self, x):
        B, T, _ = x.shape
        inner = self.h * self.p
        z, xbc, dt = torch.split(self.in_proj(x), [inner, inner + 2 * self.n, self.h], dim=-1)
        xs, Bm, Cm = torch.split(self.conv(xbc), [inner, self.n, self.n], dim=-1)
        xs = xs.view(B, T, self.h, self.p)
        dt = F.softplus(dt.float() + self.dt_bias)  # [B, T, h]
        g = dt * -torch.exp(self.A_log.float())
        v = xs * dt.unsqueeze(-1).to(xs.dtype)
        # one group: B and C are shared by every head ([B, T, 1, n]), the value heads are the SSD heads
        y, _ = self.rec(Cm.view(B, T, 1, self.n), Bm.view(B, T, 1, self.n), v, g, None, 1.0)
        y = y + xs * self.D.view(1, 1, -1, 1).to(xs.dtype)
        y = self.norm((y.reshape(B, T, inner) * F.silu(z)))
        return self.out_proj(y)


def _rotary(x, base=10000.0):
    """Rotary position embedding on the last dim of [B, T, H, D] (D even), rotate-half convention."""
    T, D = x.shape[1], x.shape[-1]
    inv = 1.0 / (base ** (torch.arange(0, D, 2, device=x.device, dtype=torch.float32) / D))
    ang = torch.arange(T, device=x.device, dtype=torch.float32)[:, None] * inv[None, :]  # [T, D/2]
    cos, sin = ang.cos()[None, :, None, :], ang.sin()[None, :, None, :]
    x1, x2 = x.float()[..., : D // 2], x.float()[..., D // 2:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)


class RetentionMixer(nn.Module):
    def __init__(self, d_model, num_heads, head_dim, impl="glr"):
        super().__init__()
        self.h, self.dk = num_heads, head_dim
        self.rec = recurrence_fn(impl)
        inner = num_heads * head_dim
        self.q_proj = nn.Linear(d_model, inner, bias=False)
        self.k_proj = nn.Linear(d_model, inner, bias=False)
        self.v_proj = nn.Linear(d_model, inner, bias=False)
        self.g_proj = nn.Linear(d_model, inner, bias=False)
        self.register_buffer("log_decay", retention_log_decay(num_heads), persistent=False)
        self.o_norm = RMSNorm(head_dim)
        self.o_proj = nn.Linear(inner, d_model, bias=False)

    def forward(self, x):
        B, T, _ = x.shape
        q = _rotary(self.q_proj(x).view(B, T, self.h, self.dk))
        k = _rotary(self.k_proj(x).view(B, T, self.h, self.dk))
        v = self.v_proj(x).view(B, T, self.h, self.dk)
        o, _ = self.rec(q, k, v, self.log_decay, None)
        o = self.o_norm(o) * F.silu(self.g_proj(x).view(B, T, self.h, self.dk))
        return self.o_proj(o.reshape(B, T, -1))


class LinearAttentionMixer(nn.Module):
    def __init__(self, d_model, num_heads, head_dim, impl="glr"):
        super().__init__()
        self.h, self.dk = num_heads, head_dim
        self.rec = recurrence_fn(impl)
        inner = num_heads * head_dim
        self.q_proj = nn.Linear(d_model, inner, bias=False)
        self.k_proj = nn.Linear(d_model, inner, bias=False)
        self.v_proj = nn.Linear(d_model, inner, bias=False)
        self.o_norm = RMSNorm(head_dim)
        self.o_proj = nn.Linear(inner, d_model, bias=False)

    def forward(self, x):
        B, T, _ = x.shape
        q = F.elu(self.q_proj(x).view(B, T, self.h, self.dk)) + 1
        k = F.elu(self.k_proj(x).view(B, T, self.h, self.dk)) + 1
        v = self.v_proj(x).view(B, T, self.h, self.dk)
        o, _ = self.rec(q, k, v, None, None)
        return self.o_proj(self.o_norm(o).reshape(B, T, -1))


def make_mixer(member, d_model, num_heads, head_dim, impl="glr"):
    if member not in MEMBERS:
        raise ValueError(f"glr: unknown member {member!r} (one of {', '.join(MEMBERS)})")
    if member == "gdn":
        return DeltaRuleMixer(d_model, num_heads, head_dim, impl, gated=True)
    if member == "deltanet":
        return DeltaRuleMixer(d_model, num_heads, head_dim, impl, gated=False)
    if member == "mamba2":
        return Mamba2Mixer(d_model, num_heads, head_dim, impl)
    if member == "retnet":
        return RetentionMixer(d_model, num_heads, head_dim, impl)
    return LinearAttentionMixer(d_model, num_heads, head_dim, impl)


class SwiGLU(nn.Module):
    def __init__(self, d_model, hidden):
        super().__init__()
        self.gate = nn.Linear(d_model, hidden, bias=False)
        self.up = nn.Linear(d_model, hidden, bias=False)
        self.down = nn.Linear(hidden, d_model, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self, member, d_model, num_heads, head_dim, impl):
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(d_model), RMSNorm(d_model)
        self.mixer = make_mixer(member, d_model, num_heads, head_dim, impl)
        self.mlp = SwiGLU(d_model, 4 * d_model)

    def forward(self, x):
        x = x + self.mixer(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class LanguageModel(nn.Module):
    """Token embedding, n_layers blocks of one member, final RMSNorm, untied output head."""

    def __init__(self, member, vocab, d_model, n_layers, head_dim, impl="glr"):
        super().__init__()
        if d_model % head_dim:
            raise ValueError(f"glr: d_model {d_model} must be a multiple of head_dim {head_dim}")
        self.embed = nn.Embedding(vocab, d_model)
        self.blocks = nn.ModuleList(Block(member, d_model, d_model // head_dim, head_dim, impl)
                                    for _ in range(n_layers))
        self.norm = RMSNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x))
