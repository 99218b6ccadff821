#!/usr/bin/env python3
"""Writes glr's kgate contracts (the *.toml beside this file), so the fourteen stay alike.

Run it after changing it: python3 glr/contracts/generate.py. README.md explains the choices."""
import os
OUT = os.path.dirname(os.path.abspath(__file__))
MEMBERS = {
    # name: (title, delta, gate)
    "gated_deltanet": ("Gated DeltaNet", 1, 1),
    "deltanet": ("DeltaNet", 1, 0),
    "mamba2": ("Mamba2 / SSD", 0, 1),
    "retnet": ("RetNet", 0, 2),
    "linear_attention": ("linear attention", 0, 0),
}
HEADER = """# glr {title}, {pass_}: {what}
# Written by glr/contracts/generate.py (edit that, then rerun it); README.md there explains the choices.
#
# {layout_note}
# overflow = false on the inputs that multiply into the state (q, k, v, beta, h0, dout, dht): the state
# sum k v^T and its gradient are held at the working precision f32, and a near-max input overflows them in
# any f32 implementation even where the scaled output would fit. NaN and +-Inf are still planted everywhere.
# Argument order and attrs: glr/kgate/binding.hpp. Kernel and oracle: build-glr/glr/libglr_kgate_{short}.so
# (kgate_run: the chunked CPU algorithm in f32; kgate_oracle: the float64 exact recurrence).
"""

def dims(varlen):
    s = ""
    if varlen:
        s += "[dims.N]\nmin = 1\nmax = 5\nnominal = 3\n\n"
    else:
        s += "[dims.B]\nmin = 1\nmax = 3\nnominal = 2\n\n"
    s += ("[dims.T]\nmin = 1\nmax = 160\nnominal = %d\n\n" % (45 if varlen else 37))
    s += "[dims.H]\nmin = 1\nmax = 2\nnominal = 1\n\n"
    s += "[dims.HV]\nmin = 1\nmax = 4\nnominal = 2\nmultiple_of = \"H\"\n\n"
    s += "[dims.K]\nmin = 1\nmax = 32\nnominal = 16\n\n"
    s += "[dims.V]\nmin = 1\nmax = 32\nnominal = 8\n\n"
    return s

NO_OVERFLOW = {"q", "k", "v", "beta", "h0", "dout", "dht"}

def tensor(kind, name, dtype, shape, domain=None, layout="strided", extra=""):
    s = "[[%s]]\nname = \"%s\"\ndtype = \"%s\"\nshape = [%s]\n" % (kind, name, dtype, ", ".join('"%s"' % x if isinstance(x, str) else str(x) for x in shape))
    if domain:
        s += "domain = %s\n" % domain
    if layout:
        s += "layout = \"%s\"\n" % layout
    if kind == "inputs" and name in NO_OVERFLOW:
        s += "overflow = false\n"
    s += extra
    return s + "\n"

def make(member, backward, varlen):
    title, delta, gate = MEMBERS[member]
    # Dtypes: fixed-batch contracts are all f32 (the strictest check of the algorithm); packed ones use
    # the user-facing mix (bf16 q, k, v, beta, dout and token gradients; f32 gate, states).
    tok = "bf16" if varlen else "f32"
    state = "f32"
    gdt = "f32"
    Bdim = 1 if varlen else "B"
    Ndim = "N" if varlen else "B"
    pass_ = "backward" if backward else "forward"
    short = "bwd" if backward else "fwd"
    what = ("dq, dk, dv%s%s, dh0 from dout and dht" % (", dg" if gate else "", ", dbeta" if delta else "")) if backward \
        else "o and the final state ht"
    layout_note = ("Packed sequences (cu_seqlens, B = 1), bf16 token tensors, f32 gate and states." if varlen
                   else "Fixed batch [B, T], every tensor f32.")
    s = HEADER.format(title=title, pass_=pass_, what=what, layout_note=layout_note, short=short)
    s += "[op]\nname = \"glr.%s.%s%s\"\n" % (member, short, ".varlen" if varlen else "")
    s += "description = \"%s %s, chunked (C = 16), grouped value heads, initial and final state%s\"\n" % (
        title, pass_, ", packed sequences" if varlen else "")
    s += "working_precision = \"f32\"\ndeterministic = true\n\n"
    s += dims(varlen)
    s += "[attrs]\nscale = 0.25\nchunk = 16\ndelta = %d\ngate = %d\ninitial_state = 1\nfinal_state = 1\n" % (delta, gate)
    if varlen:
        s += "varlen = 1\n"
    s += "\n"
    # k stays inside |k|^2 <= 2 for K <= 32, so I - beta k k^T never expands (beta in [0, 1]).
    # overflow = false on every input that multiplies into the state (q, k, v, beta, h0; dout, dht in the
    # backward): S = sum k v^T and its gradient are intermediates held at the working precision f32, and a
    # near-max input overflows them in any f32 implementation (the GPU's too) even where the scaled output
    # would fit. +-Inf and NaN are still planted in every float input; g keeps its near-max values.
    kdom = '{ kind = "uniform", low = -0.25, high = 0.25 }' if delta else '"normal"'
    s += tensor("inputs", "q", tok, [Bdim, "T", "H", "K"], '"normal"')
    s += tensor("inputs", "k", tok, [Bdim, "T", "H", "K"], kdom)
    s += tensor("inputs", "v", tok, [Bdim, "T", "HV", "V"], '"normal"')
    if gate == 1:
        s += tensor("inputs", "g", gdt, [Bdim, "T", "HV"], '{ kind = "uniform", low = -1.0, high = 0.0 }')
    if gate == 2:
        s += tensor("inputs", "g", gdt, ["HV"], '{ kind = "uniform", low = -0.3, high = -0.005 }')
    if delta:
        s += tensor("inputs", "beta", tok, [Bdim, "T", "HV"], '"probability"')
    s += tensor("inputs", "h0", state, [Ndim, "HV", "K", "V"], '{ kind = "normal", mean = 0.0, std = 0.5 }')
    if backward:
        s += tensor("inputs", "dout", tok, [Bdim, "T", "HV", "V"], '"normal"')
        s += tensor("inputs", "dht", state, [Ndim, "HV", "K", "V"], '"normal"')
    if varlen:
        s += tensor("inputs", "cu_seqlens", "i32", ["N+1"], '{ kind = "offsets", total = "T" }', layout=None)
    if not backward:
        s += tensor("outputs", "o", tok, [Bdim, "T", "HV", "V"], extra='reduced = ["T", "K"]\n')
        # The delta read P^T k is a sum over K inside the recurrence; without it ht sums over T only.
        s += tensor("outputs", "ht", state, [Ndim, "HV", "K", "V"], extra='reduced = %s\n' % ('["T", "K"]' if delta else '["T"]'))
    else:
        s += tensor("outputs", "dq", tok, [Bdim, "T", "H", "K"], extra='reduced = ["T", "V"]\n')
        s += tensor("outputs", "dk", tok, [Bdim, "T", "H", "K"], extra='reduced = ["T", "V"]\n')
        s += tensor("outputs", "dv", tok, [Bdim, "T", "HV", "V"], extra='reduced = ["T", "K"]\n')
        if gate == 1:
            s += tensor("outputs", "dg", gdt, [Bdim, "T", "HV"], extra='reduced = ["T", "K", "V"]\n')
        if gate == 2:
            s += tensor("outputs", "dg", gdt, ["HV"], extra='reduced = ["T", "K", "V"]\n')
        if delta:
            s += tensor("outputs", "dbeta", tok, [Bdim, "T", "HV"], extra='reduced = ["T", "K", "V"]\n')
        s += tensor("outputs", "dh0", state, [Ndim, "HV", "K", "V"], extra='reduced = %s\n' % ('["T", "K"]' if delta else '["T"]'))
    # Spread (docs/glr-math.md section 7).
    if not backward:
        s += "# A NaN or Inf may fill the rest of its chunk and every later token of its sequence and head (the\n"
        s += "# chunk's matrices mix its positions); ht, without a T axis, follows the oracle exactly.\n"
    else:
        s += "# The exact backward spreads both ways in time (states forward, state gradients backward), and the\n"
        s += "# chunked one adds the rest of each chunk (the reverse cumulative sum of dg runs back through it):\n"
        s += "# anywhere in the sequence of a line the oracle reaches (docs/glr-math.md section 7). dh0 and a\n"
        s += "# per-head dg, without a T axis, follow the oracle exactly.\n"
    s += "[nonfinite]\nspread = \"along\"\ndim = \"T\"\nblock = \"chunk\"\n"
    if varlen:
        s += "segments = \"cu_seqlens\"\n"
    s += "direction = \"%s\"\n" % ("both" if backward else "forward")
    s += "# An Inf meets Inf - Inf in one evaluation order and not another (the recurrence's sum_a (k_a u) q_a vs\n"
    s += "# the chunk's (q . k) u): which non-finite kind comes out is not a property of the operator.\n"
    s += "inf_may_become_nan = true\n\n"
    # Accumulation: long sums of positive terms along T; k small enough that the delta term stays a
    # contraction, g a slow decay (constant 1 would be a growth).
    s += "# Long positive sums along T (T = 160 = 10 chunks) at the largest head dims; g a slow decay (the\n"
    s += "# default constant 1 would be growth).%s\n" % (" The delta term subtracts: beta |k|^2 is kept near 2^-9\n# per step so the state stays a sum of positive terms and the gate's positive-sum bound applies." if delta else "")
    s += "[accumulation]\nsizes = { %sT = 160, H = 1, HV = 1, K = 32, V = 32 }\n\n" % ("N = 2, " if varlen else "B = 1, ")
    acc = [("q", 1.0), ("k", 0.125 if delta else 1.0), ("v", 1.0)]
    if gate:
        acc.append(("g", -0.01))
    if delta:
        acc.append(("beta", 2.0 ** -6))
    acc.append(("h0", 1.0))
    if backward:
        acc += [("dout", 1.0), ("dht", 1.0)]
    for name, val in acc:
        s += "[[accumulation.inputs]]\ninput = \"%s\"\npattern = \"positive\"\nvalue = %r\n\n" % (name, val) if name not in ("g",) else \
             "[[accumulation.inputs]]\ninput = \"%s\"\npattern = \"constant\"\nvalue = %r\n\n" % (name, val)
    s += "[limits]\ntimeout = 20\n"
    return s

for m in MEMBERS:
    for bwd in (False, True):
        name = "%s_%s.toml" % (m, "bwd" if bwd else "fwd")
        open(os.path.join(OUT, name), "w").write(make(m, bwd, False))
for m in ("gated_deltanet", "retnet"):
    for bwd in (False, True):
        name = "%s_varlen_%s.toml" % (m, "bwd" if bwd else "fwd")
        open(os.path.join(OUT, name), "w").write(make(m, bwd, True))
