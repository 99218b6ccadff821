"""The glr operator and flash-linear-attention-style drop-ins for the five family members.

Every function here ends in torch.ops.glr.recurrence (C++ autograd over glr.fwd / glr.bwd), with the
layouts of flash-linear-attention: q, k [B, T, H, K]; v [B, T, HV, V] with HV a multiple of H (grouped
value heads); per-token gates [B, T, HV]; states [N, HV, K, V]; packed sequences through cu_seqlens
(B = 1, N + 1 offsets). The recurrence (docs/glr-math.md):

    S_t = exp(g_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,      o_t = scale * S_t^T q_t

On CUDA the kernels take q, k, v in bf16 or fp16 with K, V in {64, 128}; float32 q, k, v are cast to
bf16 for the kernel and the output back to float32 (the state and the gate stay in fp32). On an sm_90 GPU
the forward of bf16 calls with K = V (64 or 128) and dense layouts runs on the tensor cores (forward_path says
which kernels a call takes and why; GLR_FORWARD_PATH=blocks forces the block programs), and so does the backward
of every member's calls with bf16 q, k, v, fp32 or bf16 g and beta, K = V = 64 or 128, HV a multiple of H,
with or without cu_seqlens (backward_path; GLR_BACKWARD_PATH=blocks). On the CPU every dtype runs (float64 exactly, for gradcheck).
On CUDA tensors recurrence()'s autograd keeps the forward's saved intermediates (torch.ops.glr.fwd_save: the wy
kernel's T and G, 66 MiB at B8 T4096 H16) for the backward (torch.ops.glr.bwd_saved), which then skips recomputing them; its
gradients are word for word those of torch.ops.glr.bwd.
"""
import math
from typing import Optional, Tuple

import torch
import torch.nn.functional as F

from . import _C  # noqa: F401  (registers torch.ops.glr.*)

# member -> (delta, gate code): gate 0 none, 1 per token [B, T, HV], 2 per head [HV]
MEMBERS = {
    "gdn": (True, 1),       # Gated DeltaNet
    "deltanet": (True, 0),  # DeltaNet
    "mamba2": (False, 1),   # Mamba2 / SSD: scalar data-dependent decay
    "retnet": (False, 2),   # RetNet: fixed decay per head
    "linear": (False, 0),   # linear attention
}

_CUDA_KERNEL_DTYPES = (torch.bfloat16, torch.float16)


def _kernel_inputs(q, k, v, g, scale):
    """The gate code, the scale, and q, k, v as the CUDA kernels take them (float32 cast to bf16)."""
    gate = 0 if g is None else (2 if g.dim() == 1 else 1)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    if q.is_cuda and q.dtype not in _CUDA_KERNEL_DTYPES:
        q, k, v = q.to(torch.bfloat16), k.to(torch.bfloat16), v.to(torch.bfloat16)
    return q, k, v, gate, scale


def forward_path(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: Optional[torch.Tensor] = None,
                 beta: Optional[torch.Tensor] = None, scale: Optional[float] = None,
                 initial_state: Optional[torch.Tensor] = None, output_final_state: bool = False,
                 cu_seqlens: Optional[torch.Tensor] = None) -> str:
    """Which kernels recurrence() runs its forward on for these arguments, and why, in one line:
    "sm90: ..." (the tensor-core forward: an sm_90 GPU, bf16 q, k, v, K = V = 64 or 128, dense layouts),
    "blocks: ..." (the CUDA block programs; the reason says what ruled sm90 out, or that the environment
    variable GLR_FORWARD_PATH=blocks forced them), or "cpu: ..." (CPU tensors). backward_path says the same
    of the backward."""
    q, k, v, gate, scale = _kernel_inputs(q, k, v, g, scale)
    return torch.ops.glr.forward_path(q, k, v, g, beta, initial_state, cu_seqlens, scale, beta is not None, gate,
                                      output_final_state)


def backward_path(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: Optional[torch.Tensor] = None,
                  beta: Optional[torch.Tensor] = None, scale: Optional[float] = None,
                  initial_state: Optional[torch.Tensor] = None, output_final_state: bool = False,
                  cu_seqlens: Optional[torch.Tensor] = None) -> str:
    """Which kernels recurrence()'s backward runs on for these arguments (with dense gradients of o and of the
    final state, as autograd passes them), and why, in one line: "sm90: ..." (the tensor-core backward: an sm_90
    GPU, Gated DeltaNet or DeltaNet, bf16 q, k, v, fp32 or bf16 g and beta, K = V = 128, HV a multiple of H, no
    cu_seqlens, dense layouts), "blocks: ..." (the reason says what ruled sm90 out, or that GLR_BACKWARD_PATH=blocks forced the
    block programs), or "cpu: ..." (CPU tensors). The backward's path does not depend on the forward's."""
    q, k, v, gate, scale = _kernel_inputs(q, k, v, g, scale)
    dout = torch.empty(q.shape[0], q.shape[1], v.shape[2], v.shape[3], dtype=v.dtype, device=v.device)
    dht = None
    if output_final_state:
        n = q.shape[0] if cu_seqlens is None else cu_seqlens.numel() - 1
        state = torch.float64 if q.dtype == torch.float64 else torch.float32  # the final state's dtype, as fwd makes it
        dht = torch.empty(n, v.shape[2], q.shape[3], v.shape[3], dtype=state, device=v.device)
    return torch.ops.glr.backward_path(q, k, v, g, beta, initial_state, cu_seqlens, dout, dht, scale,
                                       beta is not None, gate)


def recurrence(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: Optional[torch.Tensor] = None,
               beta: Optional[torch.Tensor] = None, scale: Optional[float] = None,
               initial_state: Optional[torch.Tensor] = None, output_final_state: bool = False,
               cu_seqlens: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """The whole family in one call: the delta term is on when beta is given; g is None (no decay),
    [B, T, HV] (per token) or [HV] (one constant per value head). Returns (o, final state or None)."""
    out_dtype = v.dtype
    q, k, v, gate, scale = _kernel_inputs(q, k, v, g, scale)
    o, ht = torch.ops.glr.recurrence(q, k, v, g, beta, initial_state, cu_seqlens, scale, beta is not None, gate,
                                     output_final_state)
    return o.to(out_dtype), (ht if output_final_state else None)


def _no_head_first(head_first):
    if head_first:
        raise ValueError("glr: head_first=True is not supported; pass [B, T, H, K] tensors (fla's default layout)")


def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                           cu_seqlens=None, head_first=False, use_qk_l2norm_in_kernel=False):
    """Gated DeltaNet (fla.ops.gated_delta_rule.chunk_gated_delta_rule). g: log-decay [B, T, HV] (<= 0),
    beta [B, T, HV]. use_qk_l2norm_in_kernel normalises q and k in PyTorch before the call (not fused)."""
    _no_head_first(head_first)
    if use_qk_l2norm_in_kernel:
        q, k = F.normalize(q, p=2, dim=-1), F.normalize(k, p=2, dim=-1)
    return recurrence(q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens)


def chunk_delta_rule(q, k, v, beta, scale=None, initial_state=None, output_final_state=False, cu_seqlens=None,
                     head_first=False, use_qk_l2norm_in_kernel=False):
    """DeltaNet (fla.ops.delta_rule.chunk_delta_rule): beta [B, T, HV], no decay."""
    _no_head_first(head_first)
    if use_qk_l2norm_in_kernel:
        q, k = F.normalize(q, p=2, dim=-1), F.normalize(k, p=2, dim=-1)
    return recurrence(q, k, v, None, beta, scale, initial_state, output_final_state, cu_seqlens)


def chunk_simple_gla(q, k, v, g=None, g_gamma=None, scale=None, initial_state=None, output_final_state=False,
                     cu_seqlens=None, head_first=False):
    """Scalar-decay linear attention (fla.ops.simple_gla.chunk_simple_gla): g [B, T, HV] a data-dependent
    log-decay per token (Mamba2/SSD-style), or g_gamma [HV] a fixed log-decay per head (RetNet-style), or
    neither (plain linear attention)."""
    _no_head_first(head_first)
    if g is not None and g_gamma is not None:
        raise ValueError("glr: chunk_simple_gla: give g or g_gamma, not both")
    return recurrence(q, k, v, g if g is not None else g_gamma, None, scale, initial_state, output_final_state,
                      cu_seqlens)


def retention_log_decay(num_heads: int, device=None) -> torch.Tensor:
    """RetNet's fixed per-head decays, gamma_h = 1 - 2^(-5 - h), as log-decays [num_heads] (fp32)."""
    h = torch.arange(num_heads, dtype=torch.float32, device=device)
    return torch.log1p(-torch.pow(2.0, -5.0 - h))


def chunk_retention(q, k, v, scale=None, initial_state=None, output_final_state=False, cu_seqlens=None,
                    head_first=False):
    """RetNet's multi-scale retention (fla.ops.retention.chunk_retention): fixed decays per value head."""
    _no_head_first(head_first)
    g_gamma = retention_log_decay(v.shape[2], device=v.device)
    return recurrence(q, k, v, g_gamma, None, scale, initial_state, output_final_state, cu_seqlens)


def chunk_linear_attn(q, k, v, scale=None, initial_state=None, output_final_state=False, normalize=True,
                      cu_seqlens=None, head_first=False):
    """Linear attention (fla.ops.linear_attn.chunk_linear_attn). normalize=True divides each output by
    scale * q_t . sum_{s <= t} k_s + 1e-5, as fla does (only without initial_state and cu_seqlens)."""
    _no_head_first(head_first)
    o, ht = recurrence(q, k, v, None, None, scale, initial_state, output_final_state, cu_seqlens)
    if normalize:
        if initial_state is not None or cu_seqlens is not None:
            raise ValueError("glr: chunk_linear_attn: normalize=True needs initial_state=None and cu_seqlens=None")
        s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
        group = v.shape[2] // q.shape[2]
        ct = torch.float64 if q.dtype == torch.float64 else torch.float32
        z = (q.to(ct) * s * k.to(ct).cumsum(1)).sum(-1, keepdim=True)  # [B, T, H, 1]
        z = z.repeat_interleave(group, dim=2)
        o = (o.to(ct) / (z + 1e-5)).to(o.dtype)
    return o, ht


def mamba_chunk_scan_combined(x, dt, A, B, C, chunk_size=64, D=None, z=None, dt_bias=None, initial_states=None,
                              seq_idx=None, cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, float("inf")),
                              return_final_states=False):
    """Mamba2's SSD scan (mamba_ssm.ops.triton.ssd_combined.mamba_chunk_scan_combined): x [b, l, h, p],
    dt [b, l, h], A [h] (negative), B, C [b, l, g, n] with h a multiple of g. The scan is glr's recurrence
    with q = C, k = B, v = x * dt, g = dt * A, scale 1; states are [b, h, p, n] as mamba_ssm keeps them.
    chunk_size is accepted for the signature (glr uses 64); seq_idx is not supported (use cu_seqlens)."""
    if seq_idx is not None:
        raise ValueError("glr: mamba_chunk_scan_combined: seq_idx is not supported; pack with cu_seqlens")
    ct = torch.float64 if x.dtype == torch.float64 else torch.float32  # gates and states
    dt = dt.to(ct)
    if dt_bias is not None:
        dt = dt + dt_bias.to(ct)
    if dt_softplus:
        dt = F.softplus(dt)
    if dt_limit != (0.0, float("inf")):
        dt = dt.clamp(min=dt_limit[0], max=dt_limit[1])
    g = dt * A.to(ct)
    v = (x.to(ct) * dt.unsqueeze(-1)).to(x.dtype)
    h0 = None if initial_states is None else initial_states.to(ct).transpose(-1, -2).contiguous()
    y, ht = recurrence(C.to(x.dtype), B.to(x.dtype), v, g, None, 1.0, h0, return_final_states, cu_seqlens)
    if D is not None:
        y = y + x * (D.unsqueeze(-1) if D.dim() == 1 else D)
    if z is not None:
        y = y * F.silu(z)
    if return_final_states:
        return y, ht.transpose(-1, -2)
    return y
