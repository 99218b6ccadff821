"""glr: the gated-linear-recurrence family (Gated DeltaNet, DeltaNet, Mamba2/SSD, RetNet, linear attention)
as PyTorch operators with autograd, flash-linear-attention-style drop-in functions, one layer per member,
and a training command (python -m glr.train).

Importing glr loads glr._C, which registers torch.ops.glr.{fwd, bwd, recurrence, forward_path, backward_path,
oracle_fwd, oracle_bwd}.
"""
import torch  # noqa: F401  (first: _C links against libc10/libtorch, which importing torch loads)

from . import _C  # noqa: F401  (registers torch.ops.glr.*)
from .ops import (MEMBERS, backward_path, chunk_delta_rule, chunk_gated_delta_rule, chunk_linear_attn,
                  chunk_retention, chunk_simple_gla, forward_path, mamba_chunk_scan_combined, recurrence)

__all__ = ["MEMBERS", "recurrence", "forward_path", "backward_path", "chunk_gated_delta_rule", "chunk_delta_rule",
           "chunk_simple_gla", "chunk_retention", "chunk_linear_attn", "mamba_chunk_scan_combined"]
