#!/usr/bin/env python3
"""Writes glr's kgate contracts: one per family member and pass for each profile in PROFILES (the CPU
implementations into glr/contracts/, the CUDA kernels into glr/contracts/cuda/, the tensor-core path into
glr/contracts/sm90/), so all of them stay alike.

    python3 glr/contracts/generate.py              rewrite every contract
    python3 glr/contracts/generate.py --check      write them into a temporary folder and compare it with the
                                                   committed files; exit 1 listing every file that differs, is
                                                   missing, or is a *.toml here that no profile writes
    python3 glr/contracts/generate.py --out DIR    write them under DIR instead (the same tree)
    python3 glr/contracts/generate.py --entries    one line per contract: its path, kernel and oracle (lib:symbol)

Run it after changing it. README.md explains the choices; a profile says only what differs between the
implementations it describes (sizes, dtypes, bounds, entry points, which members and passes), next to why."""
import math
import os
import sys
import tempfile
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
MEMBERS = {
    # name: (title, delta, gate)
    "gated_deltanet": ("Gated DeltaNet", 1, 1),
    "deltanet": ("DeltaNet", 1, 0),
    "mamba2": ("Mamba2 / SSD", 0, 1),
    "retnet": ("RetNet", 0, 2),
    "linear_attention": ("linear attention", 0, 0),
}
VARLEN_MEMBERS = ("gated_deltanet", "retnet")

# kgate's unit roundoff of a dtype (include/kgate/dtype.hpp: 2^-(mantissa bits + 1)).
UNIT_ROUNDOFF = {"f32": 2.0 ** -24, "bf16": 2.0 ** -8, "f16": 2.0 ** -11}


def operand_tolerance(operands, roundings, comment):
    """An output's tolerance line for a path that rounds every product's operands to `operands` and
    accumulates in f32: kgate's default form (src/kgate/compare/tolerance.cpp: 4 u |ref| + 8 u sqrt(n) rms)
    with u the operands' unit roundoff in place of the output's and the working precision's, and n the
    roundings each term carries (`roundings`) in place of the reduction length: the error of such a path
    does not grow with the length of the sums, the operands' rounding dominates it."""
    u = UNIT_ROUNDOFF[operands]
    return "tolerance = { rtol = %r, atol_rms = %r }  # %s\n" % (4 * u, 8 * u * math.sqrt(roundings), comment)


def stored_tolerance(operands, roundings, stored, comment):
    """operand_tolerance's line for an output the path computes in f32 and then stores rounded once to `stored`
    (the sm90 backward's bf16 dg and dbeta): round to nearest moves the f32 result x by at most u |x| (u the
    stored dtype's unit roundoff), so rtol grows by that u and the atol_rms term stays (|x| <= |ref| + the f32
    bound: the rest is second order)."""
    u = UNIT_ROUNDOFF[operands]
    return "tolerance = { rtol = %r, atol_rms = %r }  # %s\n" % (4 * u + UNIT_ROUNDOFF[stored], 8 * u * math.sqrt(roundings),
                                                                 comment)


def operand_roundings(operands, roundings, comment):
    """An output's `operands` line (docs/contracts.md): every term of its sums passes through at most `roundings`
    roundings to `operands` on the way (tensor-core operands), which kgate's accumulation gate adds to its
    positive-sum bound; no other gate reads it."""
    return "operands = { precision = \"%s\", roundings = %d }  # %s\n" % (operands, roundings, comment)


# The bf16 roundings each term of an output carries on the sm90 tensor-core paths: {output: (without the delta
# rule, with it)}, each (count, why); None: the terms' operands are exact (nothing declared, the gate's exact
# bound). Counted along the formulas of bench/glr/sm90_bwd_notes.md "Derivation" / "Kernels" and
# bench/glr/sm90_notes.md, a rounding where a tensor-core operand (or a stored intermediate) is rounded to bf16;
# the inputs q, k, v, dO are bf16 already (exact), the output's own rounding is the gate's 4 ulps, the fp32 decays
# and scalings its N + 4 working-precision roundings. With the delta rule the counts are to first order in the
# delta term: a path through m more delta steps adds about 5 m roundings at weight (beta |k|^2)^m (2^-11 per step
# in the accumulation case), as the notes' "about ten" for the longest path counts too.
SM90_FWD_OPERANDS = {
    # o = scale e^G Q h + P V_new: the state's bf16 copy or P (1); with the delta rule h also carries K_d, V_new,
    # T, X and the inner bf16 copy of h (X = beta V - beta e^G K h).
    "o": ((1, "h's bf16 copy or P, once per term"), (6, "h's copy, K_d, V_new, T, X, h's copy in X: first order in the delta term")),
    # ht without the delta rule: the update's e^{G_L - G} v goes in as three bf16 pieces equal to the fp32 product
    # (sm90_notes.md), K and V exact: no operand rounding, the exact bound.
    "ht": (None, (5, "K_d, V_new, T, X, h's copy in X: first order in the delta term")),
}
SM90_BWD_OPERANDS = {
    # dh = e^{G_L} dh' + Q^T (scale e^G dO) [- K^T (beta e^G dX)].
    "dh0": ((1, "the scaled dO (scale e^G dO) rounded to bf16, once per term"),
            (6, "scaled dX, dX, T, dV_new, the copy of dh', scaled dO: first order in the delta term")),
    # dq = scale e^G (dO h^T) + dA K: h's copy and K_d in h; dA.
    "dq": ((2, "h's bf16 copy and K_d in h, or dA"), (10, "the notes' longest paths, first order in the delta term")),
    # dk = e^{G_L - G} (V_new dh'^T) + dA^T Q: the copy of dh' and the scaled dO in dh'; dA.
    "dk": ((2, "the bf16 copy of dh' and the scaled dO in it, or dA"), (10, "the notes' longest path (dh' -> dV_new -> dX -> E)")),
    # dV_new = P^T dO + e^{G_L - G} (K dh') rounded, dX = T^T dV_new, dv = beta dX.
    "dv": ((4, "the copy of dh', the scaled dO in it, dV_new, dX"), (10, "the notes' longest paths, first order in the delta term")),
    # dG: <q, dO h^T>, <k, V_new dh'^T>, dP . P, and e^{G_L} <h, dh'> (h's 2 times dh' 2).
    "dg": ((4, "e^{G_L} <h, dh'>: h's copy and K_d times the copy of dh' and the scaled dO"),
           (10, "the notes' longest paths, first order in the delta term")),
    "dbeta": (None, (10, "the notes' longest paths, first order in the delta term")),
}


STATE_SCALE_4 = "tolerance = { scale = 4 }  # fp32 state: see glr/contracts/generate.py\n"

# The sm90 backward's tolerance notes (profile sm90, pass bwd). The first paragraph was measured on the HV = H, f32
# beta path (the one contract shape before 2026-12-04); sm90_bwd_new_paths_notes adds bf16 beta and grouped value heads
# with SM90_BWD_MEASURED: the host emulator (tests/glr_sm90/emu_bwd_check.cpp, single cases "B T H 1 1 mu 64 HV" with
# GLR_EMU_INPUTS=contract, GLR_EMU_SEED 11, 12, 13), per output the largest atol_rms needed at rtol 2^-6 and the largest
# |x - ref| / rms(ref) ("elem"), at f32 g and beta; Gated DeltaNet at B2 T100 H1 HV2, B2 T100 H1 HV4, B1 T320 H2 HV4,
# B3 T257 H1 HV4, B3 T257 H2 HV4 (15 runs), DeltaNet (mu = inf) at B2 T100 H1 HV2, B1 T320 H2 HV4 (6 runs), h0 and dht.
# The same at the oracle gate's input scale 1e-3 (GLR_EMU_SCALE=1e-3: q, v, dout, h0, dht times 1e-3), B2 T100 H1 HV2.
SM90_BWD_SMALL_SCALE = {
    "gated_deltanet": ("B2 T100 H1 HV2, seeds 21, 25, 26",
                       "at most 4.2e-2 (dv), 1.7e-2 (dq), 1.2e-2 (dh0), 1.1e-2 (dbeta, and the bf16 one), 1.6e-3 (dk), "
                       "2.3e-5 (dg)"),
    "deltanet": ("B2 T100 H1 HV2, seed 21", "at most 9.8e-3 (dv), 6.8e-3 (dk), 6.4e-3 (dq), 4.8e-3 (dbeta), 3.6e-3 (dh0)"),
}
SM90_BWD_MEASURED = {
    "gated_deltanet": dict(dq=2.3e-2, dk=1.9e-2, dv=3.6e-2, dg=1.8e-2, dbeta=1.5e-2, dh0=1.5e-2, elem_dg=6.2e-2,
                           elem_dbeta=3.6e-2),
    "deltanet": dict(dq=9.7e-3, dk=1.2e-2, dv=1.2e-2, dbeta=8.4e-3, dh0=4.6e-3, elem_dbeta=1.3e-2),
}


def bf16_store_need(member, name):
    """The atol_rms a bf16-stored gradient needs at rtol 2^-6 + 2^-8, at most: the f32 one's at rtol 2^-6 plus 2^-8 of
    its largest |x - ref| / rms (SM90_BWD_MEASURED)."""
    m = SM90_BWD_MEASURED[member]
    return m[name] + 2.0 ** -8 * m["elem_" + name]


SM90_BWD_TOLERANCE_NOTES = [
    "#",
    "# Tolerances: per element 2^-6 |ref| + 2^-4 rms(ref), the sm90 forward contracts' bound, on every output (dbeta,",
    "# stored bf16, adds 2^-8 |ref|: below). The tensor-core backward rounds every product's operands to bf16 (T, h, dh',",
    "# V_new, dX, dV_new, X, P, P^T, dA, E, the scaled dO and dX; fp32 accumulation, the states kept in fp32):",
    "# bench/glr/sm90_bwd_notes.md bounds it at 8 u (u = 2^-9) normwise, 16 u for dg. Per element, on the host emulator",
    "# with this contract's input distributions at HV = H and f32 beta (tests/glr_sm90/run_emu_bwd.sh with",
    "# GLR_EMU_INPUTS=contract; B2 T100 H1, B1 T320 H2, B3 T257 H2, h0 and dht): the largest atol_rms needed at rtol 2^-6",
    "# was 3.6e-2 (dk; dq, dv 2.2e-2 at most, dbeta 2.4e-2, dg 1.1e-2, dh0 9e-3). A defect shows as an error of order rms.",
    "# The accumulation case below, emulated (GLR_EMU_INPUTS=accumulation): at most 7.2e-3 relative per element on the",
    "# bf16 gradients (the gate's bound: 8 u_bf16 = 3.1e-2 and more), 6.3e-4 on dbeta, 1.6e-4 on dg, 3.6e-4 on dh0",
    "# (gamma_N(2^-24): 0.31, 0.31, 2.4e-3).",
]
SM90_BWD_DELTANET_NOTES = [
    "#",
    "# Tolerances: per element 2^-6 |ref| + 2^-4 rms(ref) on every output (dbeta, stored bf16, adds 2^-8 |ref|: below),",
    "# as ./gated_deltanet_bwd.toml (whose header derives them). Per element, on the host emulator with this contract's",
    "# input distributions at HV = H and f32 beta (tests/glr_sm90/run_emu_bwd.sh 2 100 1 1 1 inf with",
    "# GLR_EMU_INPUTS=contract: mu = inf runs DeltaNet): the largest atol_rms needed at rtol 2^-6 was 1.4e-2 (dk; dq, dv",
    "# 9.6e-3, dbeta 8.2e-3, dh0 2.3e-3). The accumulation case below, emulated (GLR_EMU_INPUTS=accumulation, B1 T320):",
    "# at most 7.3e-3 relative per element on the bf16 gradients (the gate's bound: 8 u_bf16 = 3.1e-2 and more), 8.6e-4",
    "# on dbeta, 1.9e-5 on dh0 (gamma_N(2^-24): 0.31, 2.4e-3).",
]


def e1(x):
    """A measured number as the notes write it: 2.3e-2."""
    return ("%.1e" % x).replace("e-0", "e-")


def comment_lines(text, width=118):
    """text as '# ' lines of at most width characters, after a '#' line."""
    return ["#"] + ["# " + line for line in textwrap.wrap(text, width - 2, break_on_hyphens=False)]


def sm90_bwd_new_paths_notes(member):
    """The sm90 backward's bf16 beta and grouped value heads (2026-12-04) in a main file's header."""
    m, dn = SM90_BWD_MEASURED[member], member == "deltanet"
    shapes = ("B2 T100 H1 HV2, B1 T320 H2 HV4" if dn
              else "B2 T100 H1 HV2 and HV4, B1 T320 H2 HV4, B3 T257 H1 and H2 HV4")
    return comment_lines(
        "bf16 beta and grouped value heads (new in the kernels on 2026-12-04; run only on the host emulator so far, not "
        "yet on a GPU). beta is read widened exactly to f32 (load_scalar), so the oracle and the kernels see the same "
        "beta; dbeta is the f32 path's dbeta rounded once to nearest bf16 on store (the emulator: bit for bit rn(the "
        "f32 run's dbeta), every other gradient bit for bit the f32 run's on the same beta; run_emu_bwd.sh bf16, also "
        "with GLR_EMU_INPUTS=contract), which moves it by at most u_bf16 |x| (kgate's u_bf16 = 2^-8): dbeta's rtol is "
        "2^-6 + 2^-8 and its atol_rms term is kept (where the f32 dbeta needs atol a at rtol 2^-6, the bf16 one needs at "
        "most a + 2^-8 max|x - ref| / rms at rtol 2^-6 + 2^-8). With HV = G H each value head's arithmetic is the "
        "HV = H path's (dv, %sdbeta, dh0 bit for bit the HV = H run's with q, k copied per value head; run_emu_bwd.sh "
        "gva); dq and dk are the fixed-order fp32 sums of the G value heads' fp32 partials, each carrying the HV = H "
        "path's operand roundings, rounded to bf16 once as before: the fp32 sum adds at most (G - 1) 2^-24 of "
        "sum |partial|, and the partials' errors come from independent v, dout%s, beta per value head, so they grow "
        "with G as the reference's rms does and the bound relative to rms(ref) carries over (an argument, not a proof: "
        "where the partials cancel, the atol_rms term holds it). Measured on the emulator with this contract's "
        "distributions (GLR_EMU_INPUTS=contract, f32 beta, seeds 11 to 13; %s; h0 and dht): the atol_rms needed at "
        "rtol 2^-6 at most %s (dq), %s (dk), %s (dv), %s%s (dbeta), %s (dh0); the bf16 dbeta then needs at most %s at "
        "rtol 2^-6 + 2^-8 (its largest |x - ref| / rms: %s). At the oracle gate's input scale 1e-3 (GLR_EMU_SCALE=1e-3, "
        "%s): %s."
        % ("" if dn else "dg, ", "" if dn else ", g", shapes, e1(m["dq"]), e1(m["dk"]), e1(m["dv"]),
           "" if dn else e1(m["dg"]) + " (dg), ", e1(m["dbeta"]), e1(m["dh0"]), e1(bf16_store_need(member, "dbeta")),
           e1(m["elem_dbeta"]), SM90_BWD_SMALL_SCALE[member][0], SM90_BWD_SMALL_SCALE[member][1]))


# Packed sequences in the sm90 backward (gated_deltanet_varlen_bwd.toml): why the dense file's tolerances carry over.
SM90_BWD_VARLEN_NOTES = comment_lines(
    "Packed sequences (new in the kernels on 2026-12-04; run only on the host emulator so far, not yet on a GPU): the "
    "kernels index every chunk through the forward's chunk table (chunks never cross a sequence; the state and its "
    "gradient restart from each sequence's h0 and dht), so each sequence runs the same mma and FMA sequence on the same "
    "operands as that sequence alone in a dense B = 1 batch at the same state slice width (the width changes only the "
    "order of dbeta's per-slice sums): tests/glr_sm90/run_emu_bwd.sh varlen finds every packed output bit for bit "
    "that of each sequence alone (lengths 0, 1, 33, 37, 63, 64, 65, 98, 130, 200; HV = H, 2H; bf16 g and beta) and "
    "within the dense bounds of the float64 recurrence. The dense file's tolerances and measurements therefore hold "
    "per sequence. Offsets are checked on the device: invalid ones make every output NaN, as the block programs.")


# The sm90 backward main files' `written` lines, per member (profile sm90, pass bwd; the k64 variant edits them).
SM90_BWD_WRITTEN = {"*": ("# Written by glr/contracts/generate.py, profile sm90 (edit that, then rerun it): the operator, tensors and\n"
         "# spread rules of ../{name}, at the sizes where glr's CUDA API dispatches the backward to the\n"
         "# tensor-core kernels (glr/cuda/sm90/gdn_bwd_mma.cuh) on an sm_90 device: K = V = 128, HV a multiple of\n"
         "# H (grouped value heads: v, dout, dv, the scalars and the states use HV, q, k, dq, dk use H; value\n"
         "# head hv reads q/k head hv / (HV / H)), bf16 token tensors and beta (so dbeta), f32 g (so dg) and\n"
         "# states, dense batches: what flash-linear-attention's callers pass. The layout gate's strided and\n"
         "# offset views fall back to the block programs, which is the dispatch's contract; every other gate's\n"
         "# calls run the tensor-core backward. ./gated_deltanet_bf16g_f32beta_bwd.toml covers bf16 g and f32 beta."),
         "deltanet": ("# Written by glr/contracts/generate.py, profile sm90 (edit that, then rerun it): the operator, tensors and\n"
                      "# spread rules of ../{name}, at the sizes where glr's CUDA API dispatches the backward to the\n"
                      "# tensor-core kernels (glr/cuda/sm90/gdn_bwd_mma.cuh, Gated DeltaNet's kernels with G = 0: no g read, no\n"
                      "# dg written) on an sm_90 device: K = V = 128, HV a multiple of H (grouped value heads: v, dout, dv,\n"
                      "# beta and the states use HV, q, k, dq, dk use H), bf16 token tensors and beta (so dbeta), f32\n"
                      "# states, dense batches. The layout gate's strided and offset views fall back to the block programs,\n"
                      "# which is the dispatch's contract; every other gate's calls run the tensor-core backward."),
         "gated_deltanet_varlen": (
             "# Written by glr/contracts/generate.py, profile sm90 (edit that, then rerun it): the operator, tensors and\n"
             "# spread rules of ../{name}, at the sizes where glr's CUDA API dispatches the backward to the\n"
             "# tensor-core kernels (glr/cuda/sm90/gdn_bwd_mma.cuh) on an sm_90 device: K = V = 128, HV a multiple of\n"
             "# H (grouped value heads), bf16 token tensors and beta (so dbeta), f32 g (so dg) and states, packed\n"
             "# sequences (cu_seqlens, B = 1; h0, dht, dh0 per sequence): as ./gated_deltanet_bwd.toml on dense\n"
             "# batches. The layout gate's strided and offset views fall back to the block programs, which is the\n"
             "# dispatch's contract; every other gate's calls run the tensor-core backward.")}

# The sm90 backward's members without the delta rule (Mamba2, RetNet, linear attention; 2026-12-04): the `written`
# lines and the tolerance notes of their files.
SM90_BWD_NODELTA_WRITTEN = (
    "# Written by glr/contracts/generate.py, profile sm90 (edit that, then rerun it): the operator, tensors and\n"
    "# spread rules of ../{name}, at the sizes where glr's CUDA API dispatches the backward to the\n"
    "# tensor-core kernels (glr/cuda/sm90/gdn_bwd_mma.cuh, their kDelta = false instantiation: V_new = V, no beta,\n"
    "# no dbeta) on an sm_90 device: K = V = 128, HV a multiple of H (grouped value heads), bf16 token tensors,\n"
    "# f32 g where the member has one (so dg; RetNet's one per value head, its dg the sum over every token) and\n"
    "# states. The layout gate's strided and offset views fall back to the block programs, which is the\n"
    "# dispatch's contract; every other gate's calls run the tensor-core backward.")
SM90_BWD_NODELTA_NOTES = comment_lines(
    "Tolerances: per element 2^-6 |ref| + 2^-4 rms(ref) on every output, as ./gated_deltanet_bwd.toml (whose header "
    "derives them). Without the delta rule the kernels run Gated DeltaNet's algebra with T = I and V_new = X = V (new "
    "on 2026-12-04; run only on the host emulator so far, not yet on a GPU): every term they keep carries the same bf16 "
    "operand roundings as there and the terms through W, L and beta are skipped, so the bound carries over. RetNet's "
    "dg (one per value head) is the fixed-order f32 sum of the per-token dg over every token of every sequence "
    "(dg_head_kernel). Emulator (tests/glr_sm90/run_emu_bwd.sh members): dense, grouped value heads, K = V = 64 and "
    "128, packed sequences, planted NaN and +-Inf under kgate's rule, within the dense bounds of the float64 "
    "recurrence (8 u normwise, 16 u for dg). With this contract's distributions (GLR_EMU_INPUTS=contract, B2 T100 H1 "
    "HV2, h0 and dht, seeds 11 and 12; k normal, as these files set it) the largest atol_rms needed at rtol 2^-6 at "
    "scale 1: 2.2e-2 (Mamba2), 1.7e-2 (RetNet), 6.7e-3 (linear attention), dv each time; at the oracle gate's input "
    "scale 1e-3 (GLR_EMU_SCALE=1e-3): 2.5e-2, 1.8e-2, 7.4e-3 (dv); of the 2^-4 allowed. The accumulation case "
    "(GLR_EMU_INPUTS=accumulation, B1 T320, k and h0 positive 1 as here): at most 5.0e-3 relative per element on the "
    "bf16 gradients, 3.9e-5 on dg, 3.5e-4 on dh0.")

SM90_BWD_WRITTEN_ALL = {**SM90_BWD_WRITTEN, "mamba2": SM90_BWD_NODELTA_WRITTEN, "retnet": SM90_BWD_NODELTA_WRITTEN,
                        "linear_attention": SM90_BWD_NODELTA_WRITTEN}

# The sm90 backward's K = V = 64 files (variant k64): why K = 128's tolerances carry over.
SM90_BWD_K64_NOTES = comment_lines(
    "K = V = 64 (2026-12-04; run only on the host emulator so far, not yet on a GPU): the same kernels instantiated at "
    "kD = 64 (each warp one 16-row tile of the state slice, the chunk kernel's phase 2 one 64-column part of K), so "
    "every product's operands get the same bf16 roundings as at K = 128 over inner sums half as long, and the "
    "tolerances are K = 128's (per element 2^-6 |ref| + 2^-4 rms(ref); derived and measured in the K = 128 files' "
    "headers). The emulator (tests/glr_sm90/run_emu_bwd.sh k64) checks it against the float64 recurrence in every "
    "family: dense shapes with T not a multiple of 64, h0 and dht, grouped value heads, bf16 g and beta, packed "
    "sequences (each bit for bit the same sequence run alone), planted NaN and +-Inf under kgate's rule; with this "
    "contract's distributions (sweep: B2 T100 H1, inputs x 1 and x 1e-3) every gradient within the per-element "
    "bound, the largest atol_rms needed at rtol 2^-6 3.2e-2 (dv at x 1e-3) of the 2^-4 allowed.")


# A profile: what differs between the implementations it describes. Keys (a pass may override any of them
# in its entry of `passes`, e.g. another title, implementation text or tolerances for the backward):
#   folder, title, op, algorithm, written, fixed_note, varlen_note, implementation, notes: where the files go,
#                   their header lines and description; written, fixed_note, varlen_note and notes may be
#                   {member: text, "*": text} where the members of one pass need different words, with
#                   {member + "_varlen": text} for a member's packed-sequence file
#   entries         kernel and oracle as lib:symbol ({short} is fwd or bwd): --entries prints them, and the
#                   header must name the kernel's (tests/glr_contracts checks it)
#   passes          {"fwd": {...}, "bwd": {...}}: the passes written, each with optional `members` and
#                   `varlen_members` (default: all five, VARLEN_MEMBERS) and overrides of the keys here
#   token_dtype     q, k, v, dout, o and their gradients, by varlen (False, True); beta_dtype (default the
#                   token dtype) for beta and dbeta; g_dtype (default f32) for g and dg; the states are always f32
#   gva             grouped value heads (HV a multiple of H); False: HV = H, and the files have no HV dim
#   T, K, V, scale, chunk, k_delta   sizes, attrs and the delta members' k domain
#   tolerance       {output name: line} overriding kgate's derived bound (operand_tolerance for a path that
#                   rounds operands; none: kgate's own bound for the output dtype and working precision f32)
#   accumulation    the accumulation gate's case; timeout the per-call limit
#   variants        in a pass's entry: {tag: overrides} for more contracts of that pass, each applied on top of the
#                   pass (its members, dtypes, text, tolerances); they go to {member}_{tag}_{short}.toml with op
#                   name ...{short}.{tag} (the sm90 backward's bf16g_f32beta: the dtypes its main files leave out)
PROFILES = {
    # The chunked CPU algorithm and the float64 oracle (glr/kgate, libglr_kgate_{fwd,bwd}.so). Small, so
    # every gate runs in seconds on the CPU.
    "cpu": dict(
        folder="",
        title="glr",
        op="glr",
        algorithm="chunked (C = 16)",
        written="# Written by glr/contracts/generate.py (edit that, then rerun it); README.md there explains the choices.",
        implementation=[
            "# Argument order and attrs: glr/kgate/binding.hpp. Kernel and oracle: build-glr/glr/libglr_kgate_{short}.so",
            "# (kgate_run: the chunked CPU algorithm in f32; kgate_oracle: the float64 exact recurrence).",
        ],
        entries=dict(kernel="libglr_kgate_{short}.so:kgate_run", oracle="libglr_kgate_{short}.so:kgate_oracle"),
        passes={"fwd": {}, "bwd": {}},
        # Fixed-batch contracts are all f32 (the strictest check of the algorithm); packed ones use the
        # user-facing mix (bf16 q, k, v, beta, dout and token gradients; f32 gate, states).
        token_dtype={False: "f32", True: "bf16"},
        fixed_note="Fixed batch [B, T], every tensor f32.",
        T=dict(max=160, nominal={False: 37, True: 45}),
        K=dict(min=1, max=32, nominal=16, multiple_of=None),
        V=dict(min=1, max=32, nominal=8, multiple_of=None),
        scale=0.25,
        chunk=16,
        # k stays inside |k|^2 <= 2 for K <= 32, so I - beta k k^T never expands (beta in [0, 1]).
        k_delta=0.25,
        tolerance={},
        accumulation=dict(T=160, K=32, V=32, chunks=10, delta_note=("2^-9", ""), k_delta=0.125, beta=2.0 ** -6,
                          h0_delta=1.0),
        timeout=20,
    ),
    # The CUDA kernels (glr/cuda, glr_cuda_kgate_{fwd,bwd}.so) and their host emulation: the CPU profile's
    # operator, tensors, domains and spread rules at the sizes the kernels take.
    "cuda": dict(
        folder="cuda",
        title="glr CUDA",
        op="glr.cuda",
        algorithm="CUDA kernels (C = 64)",
        written=("# Written by glr/contracts/generate.py, profile cuda (edit that, then rerun it): the operator, tensors and\n"
                 "# spread rules of ../{name}, at the kernels' sizes (K, V in {{64, 128}}, chunk 64)."),
        implementation=[
            "# Kernel: glr_cuda_kgate_{short}.so:kgate_run_blocks (the block programs on the GPU; plain kgate_run sends",
            "# bf16 dense K = V forwards on sm_90 to the tensor-core path, judged by ../sm90/) or glr_cuda_emu_kgate_{short}.so",
            "# (their host emulation); oracle: libglr_kgate_{short}.so (kgate_oracle: the float64 exact recurrence).",
            "# Argument order and attrs: glr/kgate/binding.hpp (glr/cuda/abi/abi_call.hpp reads them the same way).",
        ],
        # kgate_run_blocks: the block programs whatever the device (plain kgate_run may dispatch to sm90).
        entries=dict(kernel="glr_cuda_kgate_{short}.so:kgate_run_blocks",
                     emulation="glr_cuda_emu_kgate_{short}.so:kgate_run",
                     oracle="libglr_kgate_{short}.so:kgate_oracle"),
        passes={"fwd": {}, "bwd": {}},
        # Token tensors (q, k, v, beta, o, dout and their gradients) bf16, the gate and the states f32, as
        # the kernels are used (issue 5: bf16 inputs).
        token_dtype={False: "bf16", True: "bf16"},
        fixed_note="Fixed batch [B, T], bf16 token tensors, f32 gate and states.",
        # T up to 320 (nominal 100): several chunks of 64 and a short last one.
        T=dict(max=320, nominal={False: 100, True: 100}),
        # K and V in {64, 128} and chunk = 64: the kernels' only sizes (glr/params.hpp kGpuHeadDims,
        # kGpuChunks); scale = 1/sqrt(64).
        K=dict(min=64, max=128, nominal=64, multiple_of=64),
        V=dict(min=64, max=128, nominal=64, multiple_of=64),
        scale=0.125,
        chunk=64,
        # Halved, so beta |k|^2 stays below 1 at K = 128 as the CPU profile's +-0.25 does at K = 32.
        k_delta=0.125,
        # fp32 states (ht, dh0) with tolerance scale 4: the default bound (4 u |ref| + 8 u sqrt(N) rms)
        # assumes errors that grow like sqrt(N); the chunked form carries decays as differences of cumulative
        # log-decays and solves a triangular system per chunk, and its fp32 state errors reach 1.0-1.6x that
        # bound at K = 64..128 (measured on the host emulation; the CPU profile's K <= 32 stays under it). A
        # defect shows as an error of order |ref|.
        tolerance={"ht": STATE_SCALE_4, "dh0": STATE_SCALE_4},
        # At K = 128, T = 320 (5 chunks), k halved, and for the delta members beta = 2^-10 and h0 = 0.01:
        # with the CPU profile's beta = 2^-6 and h0 = 1 at K = 128, dk picks up negative WY terms
        # (dW = -dV_new S^T) that cancel its positive ones, so some elements are differences of large terms
        # and the gate's bound for a sum of positive terms does not apply (measured: an fp32-accurate dk 7x
        # over it on a 5e-6 element among 0.05s); with these every term stays positive (measured: 0.24x).
        accumulation=dict(T=320, K=128, V=64, chunks=5, delta_note=("2^-13", " and h0 small,"), k_delta=0.0625,
                          beta=2.0 ** -10, h0_delta=0.01),
        # The same contracts also drive the host emulation of the kernels.
        timeout=120,
    ),
    # The tensor-core forward (glr/cuda/sm90, rung 3): the same library as the cuda profile
    # (glr_cuda_kgate_fwd.so), at the sizes where glr's CUDA API dispatches to it on an sm_90 device: K = V = 128
    # (its only head dims so far), bf16 token tensors, f32 gate, bf16 beta, states f32; and the tensor-core backward
    # of every member (the "bwd" pass below: Gated DeltaNet and DeltaNet, and since 2026-12-04 Mamba2, RetNet and
    # linear attention; before that their backward ran the block programs, which the cuda profile covers). The layout gate's strided views fall back to the block programs, which is the
    # dispatch's contract; every other gate's calls are dense and run the tensor-core kernels.
    # GLR_FORWARD_PATH=blocks (GLR_BACKWARD_PATH=blocks) runs the same contracts on the block programs, for diffing.
    "sm90": dict(
        folder="sm90",
        title="glr sm90",
        op="glr.sm90",
        algorithm="sm90 tensor-core forward (C = 64)",
        written=("# Written by glr/contracts/generate.py, profile sm90 (edit that, then rerun it): the operator, tensors and\n"
                 "# spread rules of ../{name}, at the tensor-core forward's sizes (K = V = 128, chunk 64)."),
        implementation=[
            "# Kernel: glr_cuda_kgate_{short}.so:kgate_run on an sm_90 GPU (dense bf16 calls at K = V = 128 run glr/cuda/sm90;",
            "# GLR_FORWARD_PATH=blocks forces the block programs); oracle: libglr_kgate_{short}.so (kgate_oracle).",
            "# Argument order and attrs: glr/kgate/binding.hpp (glr/cuda/abi/abi_call.hpp reads them the same way).",
        ],
        # kgate_run: what glr's API dispatches to (the tensor-core path for these calls on sm_90).
        entries=dict(kernel="glr_cuda_kgate_{short}.so:kgate_run", oracle="libglr_kgate_{short}.so:kgate_oracle"),
        passes={
            "fwd": {},
            # The tensor-core backward (glr/cuda/sm90/gdn_bwd_mma.cuh): Gated DeltaNet and DeltaNet (g = 0), dense
            # batches, HV a multiple of H (grouped value heads), g and beta each f32 or bf16 with dg and dbeta in
            # their dtype. The main contracts call it as flash-linear-attention's callers do (bf16 beta, f32 g) with
            # grouped value heads on (nominal HV = 2H; the shapes gate also reaches HV = H and 4H); the variant
            # bf16g_f32beta keeps the other dtype of each scalar covered (bf16 g, f32 beta). The kernels read and
            # write g and beta through two independent run-time flags (g_bf16, beta_bf16: load_scalar and
            # store_scalar), so the two Gated DeltaNet files together run both branches of each. The bf16 and GVA
            # paths have run only on the host emulator so far, not on a GPU (2026-12-04). Packed sequences
            # (cu_seqlens, since 2026-12-04: each sequence's chunks through the forward's chunk table) in
            # gated_deltanet_varlen_bwd.toml, with the main file's dtypes and grouped value heads. Since 2026-12-04
            # also the members without the delta rule (the kernels' kDelta = false: no beta, no dbeta; RetNet's dg
            # one per value head), dense and (RetNet) packed, with the same tolerances (their header says why).
            "bwd": dict(
                members=("gated_deltanet", "deltanet", "mamba2", "retnet", "linear_attention"),
                varlen_members=("gated_deltanet", "retnet"),
                algorithm="sm90 tensor-core backward (C = 64)",
                written=SM90_BWD_WRITTEN_ALL,
                varlen_note={"*": "Packed sequences (cu_seqlens, B = 1), bf16 token tensors and beta, f32 gate and states.",
                             "retnet": "Packed sequences (cu_seqlens, B = 1), bf16 token tensors, f32 gate and states."},
                fixed_note={"*": "Fixed batch [B, T], bf16 token tensors and beta, f32 gate and states.",
                            "deltanet": "Fixed batch [B, T], bf16 token tensors and beta, f32 states.",
                            "mamba2": "Fixed batch [B, T], bf16 token tensors, f32 gate and states.",
                            "retnet": "Fixed batch [B, T], bf16 token tensors, f32 gate and states.",
                            "linear_attention": "Fixed batch [B, T], bf16 token tensors, f32 states."},
                implementation=[
                    "# Kernel: glr_cuda_kgate_{short}.so:kgate_run on an sm_90 GPU (GLR_BACKWARD_PATH=blocks forces the block programs,",
                    "# for diffing); oracle: libglr_kgate_{short}.so (kgate_oracle: the float64 exact recurrence).",
                    "# Argument order and attrs: glr/kgate/binding.hpp (glr/cuda/abi/abi_call.hpp reads them the same way).",
                ],
                notes={"*": SM90_BWD_TOLERANCE_NOTES + sm90_bwd_new_paths_notes("gated_deltanet"),
                       "deltanet": SM90_BWD_DELTANET_NOTES + sm90_bwd_new_paths_notes("deltanet"),
                       "gated_deltanet_varlen": SM90_BWD_TOLERANCE_NOTES + sm90_bwd_new_paths_notes("gated_deltanet")
                       + SM90_BWD_VARLEN_NOTES,
                       **{m: SM90_BWD_NODELTA_NOTES for m in ("mamba2", "retnet", "linear_attention")},
                       "retnet_varlen": SM90_BWD_NODELTA_NOTES + SM90_BWD_VARLEN_NOTES},
                gva=True,
                beta_dtype="bf16",
                g_dtype="f32",
                tolerance={**{name: operand_tolerance("bf16", 4, "bf16 operands: see the header")
                              for name in ("dq", "dk", "dv", "dg", "dh0")},
                           "dbeta": stored_tolerance("bf16", 4, "bf16", "bf16 operands, stored bf16: see the header")},
                operands=SM90_BWD_OPERANDS,
                # The other dtype of each scalar: bf16 g (so dg), f32 beta (so dbeta), grouped value heads on.
                variants={"bf16g_f32beta": dict(
                    members=("gated_deltanet",),
                    varlen_members=(),  # the dtypes' paths do not meet the chunk indexing: the dense file covers them
                    algorithm="sm90 tensor-core backward (C = 64), bf16 g, f32 beta",
                    written=("# Written by glr/contracts/generate.py, profile sm90 (edit that, then rerun it): the operator, tensors and\n"
                             "# spread rules of ../{name}, at the sizes where glr's CUDA API dispatches the backward to the\n"
                             "# tensor-core kernels (glr/cuda/sm90/gdn_bwd_mma.cuh) on an sm_90 device, as ./gated_deltanet_bwd.toml\n"
                             "# (K = V = 128, HV a multiple of H, bf16 token tensors, f32 states, dense batches) with the other dtype of\n"
                             "# each scalar: bf16 g (so dg) and f32 beta (so dbeta). The layout gate's strided and offset views fall\n"
                             "# back to the block programs, which is the dispatch's contract; every other gate's calls run the\n"
                             "# tensor-core backward."),
                    fixed_note="Fixed batch [B, T], bf16 token tensors and g, f32 beta and states.",
                    notes=comment_lines(
                        "Tolerances: per element 2^-6 |ref| + 2^-4 rms(ref) (the sm90 forward contracts' bound) on dq, dk, dv, "
                        "dbeta, dh0, derived and measured in ./gated_deltanet_bwd.toml's header (f32 beta is the path measured "
                        "there at HV = H, and its grouped value heads are measured there too). bf16 g (new in the kernels on "
                        "2026-12-04; run only on the host emulator so far, not yet on a GPU) is read widened exactly to f32 "
                        "(load_scalar), so the oracle and the kernels see the same g and only dg's store adds a rounding: dg is "
                        "the f32 path's dg rounded once to nearest bf16 (the emulator: bit for bit rn(the f32 run's dg), dq, dk, "
                        "dv, dbeta, dh0 bit for bit the f32 run's on the same g; tests/glr_sm90/run_emu_bwd.sh bf16), which "
                        "moves it by at most u_bf16 |x| (kgate's u_bf16 = 2^-8): dg's rtol is 2^-6 + 2^-8 and its atol_rms term "
                        "is kept (where the f32 dg needs atol a at rtol 2^-6, the bf16 one needs at most a + 2^-8 "
                        "max|x - ref| / rms at rtol 2^-6 + 2^-8). Measured on the emulator with the contract's distributions at "
                        "f32 g (./gated_deltanet_bwd.toml's runs): the f32 dg needs at most %s at rtol 2^-6 (largest "
                        "|x - ref| / rms %s), so the bf16 dg at most %s."
                        % (e1(SM90_BWD_MEASURED["gated_deltanet"]["dg"]), e1(SM90_BWD_MEASURED["gated_deltanet"]["elem_dg"]),
                           e1(bf16_store_need("gated_deltanet", "dg")))),
                    g_dtype="bf16",
                    beta_dtype="f32",
                    tolerance={**{name: operand_tolerance("bf16", 4, "bf16 operands: see the header")
                                  for name in ("dq", "dk", "dv", "dbeta", "dh0")},
                               "dg": stored_tolerance("bf16", 4, "bf16", "bf16 operands, stored bf16: see the header")},
                ),
                # K = V = 64 (the kernels' kD = 64 instantiation, 2026-12-04): the main files' members, dtypes,
                # grouped value heads and packed sequences at the other head dims the backward takes.
                "k64": dict(
                    written={key: text.replace("on an sm_90 device: K = V = 128,", "on an sm_90 device: K = V = 64 (the\n"
                                               "# kernels' head-dim template parameter kD = 64; the files without _k64 are K = V = 128),")
                             for key, text in SM90_BWD_WRITTEN_ALL.items()},
                    notes={key: SM90_BWD_K64_NOTES for key in ("*", "deltanet", "gated_deltanet_varlen")},
                    K=dict(min=64, max=64, nominal=64, multiple_of=None),
                    V=dict(min=64, max=64, nominal=64, multiple_of=None),
                    accumulation=dict(T=320, K=64, V=64, chunks=5, delta_note=("2^-13", " and h0 small,"),
                                      k_delta=0.0625, beta=2.0 ** -10, h0_delta=0.01),
                )},
            ),
        },
        token_dtype={False: "bf16", True: "bf16"},
        fixed_note="Fixed batch [B, T], bf16 token tensors, f32 gate and states.",
        T=dict(max=320, nominal={False: 100, True: 100}),
        K=dict(min=128, max=128, nominal=128, multiple_of=None),
        V=dict(min=128, max=128, nominal=128, multiple_of=None),
        # 1/sqrt(128) is not exact in binary; the kernels take any scale, and the cuda profile's 1/8 keeps
        # the outputs' magnitudes alike across the two profiles.
        scale=0.125,
        chunk=64,
        k_delta=0.125,
        # The tensor-core path rounds every product's operands to bf16 (T, the state's copy, V_new, P; fp32
        # accumulation, the state itself kept in fp32), so o and ht carry a few bf16 roundings of their
        # terms, not the f32 stages' u_f32 sqrt(N): operand_tolerance("bf16", 4), per element 2^-6 |ref| +
        # 2^-4 rms (bench/glr/sm90_fwd_check.cu bounds the same kernels at 8 u normwise and 32 u of max |ref|
        # with u = 2^-9; the host emulator measured 1.3e-3 to 5.5e-3 of max |ref|, about 2.5e-2 rms at worst).
        # A defect shows as an error of order rms.
        tolerance={name: operand_tolerance("bf16", 4, "bf16 operands: see glr/contracts/generate.py (profile sm90)")
                   for name in ("o", "ht")},
        operands=SM90_FWD_OPERANDS,
        accumulation=dict(T=320, K=128, V=128, chunks=5, delta_note=("2^-13", " and h0 small,"), k_delta=0.0625,
                          beta=2.0 ** -10, h0_delta=0.01),
        timeout=120,
    ),
}

# The sm90 tensor-core kernels on the host emulator (glr_sm90_emu_kgate_{fwd,bwd}.so: glr/cuda/sm90/forward.cu and
# backward.cu compiled against tests/glr_sm90/emu.hpp), so kgate's gates judge the tensor-core path's logic on a CPU
# (ctest glr_sm90_emu_kgate). The sm90 profile's operator, members, dtypes, domains, tolerances and spread rules (each
# pass's members follow the sm90 row's, so a member the dispatch gains is judged here too), at sizes the emulator runs
# in seconds: K = V = 64 (the kernels' kD = 64 instantiation; the emulator's cost grows with K V), T up to 130 (three
# chunks of 64, the last of 2 tokens; nominal 70: two chunks, the second partial), B and HV up to 2 (nominal B = 1,
# H = 1, HV = 2: grouped value heads), up to 3 packed sequences. Each block the emulator runs is 128 host threads in
# lockstep through every shuffle, ldmatrix and mma, so a call costs about its grids' block count (0.5 to 3 s here).
# The nominal has two (sequence, value head) lines, so grouped value heads are judged and the nan and inf gates'
# first and last sites (first element, last element; each planted in a case of its own, as is the random one) fall
# on different lines.
def sm90_emu_profile(sm90):
    k64 = dict(min=64, max=64, nominal=64, multiple_of=None)
    acc = dict(T=130, K=64, V=64, chunks=3, delta_note=("2^-13", " and h0 small,"), k_delta=0.0625, beta=2.0 ** -10,
               h0_delta=0.01)
    emu = dict(folder="sm90-emu", title="glr sm90 (host emulation)", op="glr.sm90emu",
               implementation=[
                   "# Kernel: glr_sm90_emu_kgate_{short}.so:kgate_run (the sm90 tensor-core kernels on the host emulator:",
                   "# glr/cuda/sm90/emu; a call the tensor-core path does not take is refused, never run on the block",
                   "# programs); oracle: libglr_kgate_{short}.so (kgate_oracle: the float64 exact recurrence).",
                   "# Argument order and attrs: glr/kgate/binding.hpp (glr/cuda/abi/abi_call.hpp reads them the same way).",
               ],
               entries=dict(kernel="glr_sm90_emu_kgate_{short}.so:kgate_run", oracle="libglr_kgate_{short}.so:kgate_oracle"),
               T=dict(max=130, nominal={False: 70, True: 70}), K=k64, V=k64,
               batch=dict(N=(1, 3, 2), B=(1, 2, 1), HV=(1, 2, 2)),
               accumulation=acc, timeout=60)
    written = ("# Written by glr/contracts/generate.py, profile sm90-emu (edit that, then rerun it): the sm90 profile's\n"
               "# ../sm90/ contract for this member and pass (operator, tensors, dtypes, tolerances, spread rules of\n"
               "# ../{name}), at the host emulator's sizes: K = V = 64, T up to 130, B and HV up to 2.")
    passes = {}
    for short, over in sm90["passes"].items():
        p = {k: v for k, v in over.items() if k not in ("variants", "written", "implementation")}
        p["written"] = written
        p["notes"] = comment_lines(
            "Tolerances: the sm90 profile's, derived and measured in ../sm90/'s headers (K = V = 64: the same bf16 operand "
            "roundings over shorter sums, ../sm90/*_k64_bwd.toml). What the emulator cannot show: timing, the asynchrony "
            "of cp.async (an immediate copy here), and the hardware's own fp32 accumulation order inside mma.sync (the "
            "emulator sums each product exactly and rounds once).")
        passes[short] = p
    return {**sm90, **emu, "passes": passes, "written": written}


PROFILES["sm90-emu"] = sm90_emu_profile(PROFILES["sm90"])

HEADER = """# {title} {member_title}, {pass_}: {what}
{written}
#
# {layout_note}
# overflow = false on the inputs that multiply into the state (q, k, v, beta, h0, dout, dht): the state
# sum k v^T and its gradient are held at the working precision f32, and a near-max input overflows them in
# any f32 implementation even where the scaled output would fit. NaN and +-Inf are still planted everywhere.
{implementation}
{notes}"""


# The batch dims (min, max, nominal) every profile shares unless its `batch` key overrides some.
BATCH = dict(N=(1, 5, 3), B=(1, 3, 2), H=(1, 2, 1), HV=(1, 4, 2))


def dims(prof, varlen):
    batch = {**BATCH, **prof.get("batch", {})}
    s = ""
    if varlen:
        s += "[dims.N]\nmin = %d\nmax = %d\nnominal = %d\n\n" % batch["N"]
    else:
        s += "[dims.B]\nmin = %d\nmax = %d\nnominal = %d\n\n" % batch["B"]
    s += "[dims.T]\nmin = 1\nmax = %d\nnominal = %d\n\n" % (prof["T"]["max"], prof["T"]["nominal"][varlen])
    s += "[dims.H]\nmin = %d\nmax = %d\nnominal = %d\n\n" % batch["H"]
    if prof.get("gva", True):
        s += "[dims.HV]\nmin = %d\nmax = %d\nnominal = %d\nmultiple_of = \"H\"\n\n" % batch["HV"]
    for name in ("K", "V"):
        d = prof[name]
        s += "[dims.%s]\nmin = %d\nmax = %d\nnominal = %d\n" % (name, d["min"], d["max"], d["nominal"])
        if d["multiple_of"]:
            s += "multiple_of = %d\n" % d["multiple_of"]
        s += "\n"
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


def make(prof, member, backward, varlen, filename):
    """One contract's text. prof: a profile with its pass's overrides applied (resolve)."""
    member_title, delta, gate = MEMBERS[member]
    tok = prof["token_dtype"][varlen]
    beta_dt = prof.get("beta_dtype", tok)
    state = "f32"
    gdt = prof.get("g_dtype", "f32")
    gva = prof.get("gva", True)
    HV = "HV" if gva else "H"  # the value heads' dim: without grouped value heads there are H of them
    Bdim = 1 if varlen else "B"
    Ndim = "N" if varlen else "B"
    pass_ = "backward" if backward else "forward"
    short = "bwd" if backward else "fwd"
    tol = prof["tolerance"]
    what = ("dq, dk, dv%s%s, dh0 from dout and dht" % (", dg" if gate else "", ", dbeta" if delta else "")) if backward \
        else "o and the final state ht"
    # fixed_note and notes may be {member: value, "*": value} where members of one pass differ, and
    # {member + "_varlen": value} where a member's packed-sequence file needs its own words.
    def per_member(v):
        if not isinstance(v, dict):
            return v
        if varlen and member + "_varlen" in v:
            return v[member + "_varlen"]
        return v.get(member, v["*"])
    layout_note = (per_member(prof.get("varlen_note", "Packed sequences (cu_seqlens, B = 1), bf16 token tensors, f32 gate "
                                                      "and states.")) if varlen
                   else per_member(prof["fixed_note"]))
    s = HEADER.format(title=prof["title"], member_title=member_title, pass_=pass_, what=what,
                      written=per_member(prof["written"]).format(name=filename), layout_note=layout_note,
                      implementation="\n".join(prof["implementation"]).format(short=short),
                      notes="".join(line + "\n" for line in per_member(prof.get("notes", []))))
    s += "[op]\nname = \"%s.%s.%s%s%s\"\n" % (prof["op"], member, short, ".varlen" if varlen else "",
                                            "." + prof["variant"] if prof.get("variant") else "")
    s += "description = \"%s %s, %s, %sinitial and final state%s\"\n" % (
        member_title, pass_, prof["algorithm"], "grouped value heads, " if gva else "",
        ", packed sequences" if varlen else "")
    s += "working_precision = \"f32\"\ndeterministic = true\n\n"
    s += dims(prof, varlen)
    s += "[attrs]\nscale = %r\nchunk = %d\ndelta = %d\ngate = %d\ninitial_state = 1\nfinal_state = 1\n" % (
        prof["scale"], prof["chunk"], delta, gate)
    if varlen:
        s += "varlen = 1\n"
    s += "\n"
    # overflow = false on every input that multiplies into the state (q, k, v, beta, h0; dout, dht in the
    # backward): S = sum k v^T and its gradient are intermediates held at the working precision f32, and a
    # near-max input overflows them in any f32 implementation (the GPU's too) even where the scaled output
    # would fit. +-Inf and NaN are still planted in every float input; g keeps its near-max values.
    kdom = ('{ kind = "uniform", low = -%r, high = %r }' % (prof["k_delta"], prof["k_delta"])) if delta else '"normal"'
    s += tensor("inputs", "q", tok, [Bdim, "T", "H", "K"], '"normal"')
    s += tensor("inputs", "k", tok, [Bdim, "T", "H", "K"], kdom)
    s += tensor("inputs", "v", tok, [Bdim, "T", HV, "V"], '"normal"')
    if gate == 1:
        s += tensor("inputs", "g", gdt, [Bdim, "T", HV], '{ kind = "uniform", low = -1.0, high = 0.0 }')
    if gate == 2:
        s += tensor("inputs", "g", gdt, [HV], '{ kind = "uniform", low = -0.3, high = -0.005 }')
    if delta:
        s += tensor("inputs", "beta", beta_dt, [Bdim, "T", HV], '"probability"')
    s += tensor("inputs", "h0", state, [Ndim, HV, "K", "V"], '{ kind = "normal", mean = 0.0, std = 0.5 }')
    if backward:
        s += tensor("inputs", "dout", tok, [Bdim, "T", HV, "V"], '"normal"')
        s += tensor("inputs", "dht", state, [Ndim, HV, "K", "V"], '"normal"')
    if varlen:
        s += tensor("inputs", "cu_seqlens", "i32", ["N+1"], '{ kind = "offsets", total = "T" }', layout=None)
    # The delta read P^T k is a sum over K inside the recurrence; without it the states sum over T only.
    state_reduced = 'reduced = %s\n' % ('["T", "K"]' if delta else '["T"]')

    ops = prof.get("operands", {})

    def output(name, dtype, shape, reduced):
        op = ops.get(name, (None, None))[delta]
        line = operand_roundings("bf16", op[0], "bf16 roundings per term: " + op[1]) if op else ""
        return tensor("outputs", name, dtype, shape, extra=reduced + tol.get(name, "") + line)
    if not backward:
        s += output("o", tok, [Bdim, "T", HV, "V"], 'reduced = ["T", "K"]\n')
        s += output("ht", state, [Ndim, HV, "K", "V"], state_reduced)
    else:
        s += output("dq", tok, [Bdim, "T", "H", "K"], 'reduced = ["T", "V"]\n')
        s += output("dk", tok, [Bdim, "T", "H", "K"], 'reduced = ["T", "V"]\n')
        s += output("dv", tok, [Bdim, "T", HV, "V"], 'reduced = ["T", "K"]\n')
        if gate == 1:
            s += output("dg", gdt, [Bdim, "T", HV], 'reduced = ["T", "K", "V"]\n')
        if gate == 2:
            s += output("dg", gdt, [HV], 'reduced = ["T", "K", "V"]\n')
        if delta:
            s += output("dbeta", beta_dt, [Bdim, "T", HV], 'reduced = ["T", "K", "V"]\n')
        s += output("dh0", state, [Ndim, HV, "K", "V"], state_reduced)
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
    acc = prof["accumulation"]
    s += "# Long positive sums along T (T = %d = %d chunks) at the largest head dims; g a slow decay (the\n" % (
        acc["T"], acc["chunks"])
    s += "# default constant 1 would be growth).%s\n" % (
        (" The delta term subtracts: beta |k|^2 is kept near %s\n# per step%s so the state stays a sum of positive "
         "terms and the gate's positive-sum bound applies." % acc["delta_note"]) if delta else "")
    s += "[accumulation]\nsizes = { %sT = %d, H = 1, %sK = %d, V = %d }\n\n" % (
        "N = 2, " if varlen else "B = 1, ", acc["T"], "HV = 1, " if gva else "", acc["K"], acc["V"])
    values = [("q", 1.0), ("k", acc["k_delta"] if delta else 1.0), ("v", 1.0)]
    if gate:
        values.append(("g", -0.01))
    if delta:
        values.append(("beta", acc["beta"]))
    values.append(("h0", acc["h0_delta"] if delta else 1.0))
    if backward:
        values += [("dout", 1.0), ("dht", 1.0)]
    for name, val in values:
        pattern = "constant" if name == "g" else "positive"
        s += "[[accumulation.inputs]]\ninput = \"%s\"\npattern = \"%s\"\nvalue = %r\n\n" % (name, pattern, val)
    s += "[limits]\ntimeout = %d\n" % prof["timeout"]
    return s


def resolve(prof, short):
    """The profile as its pass `short` ("fwd", "bwd") sees it: the pass's overrides applied."""
    over = prof["passes"][short]
    return {**{k: v for k, v in prof.items() if k != "passes"}, **over}


def resolve_variant(pass_, tag):
    """A pass's variant `tag` (its entry in the pass's `variants`) applied on top of the resolved pass."""
    return {**{k: v for k, v in pass_.items() if k != "variants"}, **pass_["variants"][tag], "variant": tag}


def base_name(member, backward, varlen):
    """The file name a contract's header points at in the cpu profile's folder (../{name}): a variant has none of
    its own, the operator and tensors are its member's."""
    return "%s%s_%s.toml" % (member, "_varlen" if varlen else "", "bwd" if backward else "fwd")


def cases(profiles=None):
    """Every contract as (path relative to this folder, resolved profile, member, backward, varlen)."""
    out = []
    for prof in (profiles or PROFILES).values():
        for short in ("fwd", "bwd"):
            if short not in prof["passes"]:
                continue
            base = resolve(prof, short)
            for tag, p in [(None, base)] + [(tag, resolve_variant(base, tag)) for tag in base.get("variants", {})]:
                members = p.get("members", tuple(MEMBERS))
                varlen_members = p.get("varlen_members", VARLEN_MEMBERS)
                unknown = [m for m in members + tuple(varlen_members) if m not in MEMBERS]
                if unknown:
                    raise ValueError("profile %s, %s: unknown members %s" % (p["folder"] or "cpu", short, unknown))
                for varlen, names in ((False, members), (True, varlen_members)):
                    for m in names:
                        name = "%s%s%s_%s.toml" % (m, "_varlen" if varlen else "", "_" + tag if tag else "", short)
                        out.append((os.path.join(p["folder"], name), p, m, short == "bwd", varlen))
    out.sort(key=lambda c: c[0])
    return out


def contracts(profiles=None):
    """Every contract: {path relative to this folder: text}."""
    return {rel: make(p, m, bwd, varlen, base_name(m, bwd, varlen)) for rel, p, m, bwd, varlen in cases(profiles)}


def entries(profiles=None):
    """{path relative to this folder: {role: "lib:symbol"}} (roles: kernel, oracle, and emulation where one
    exists), {short} filled in."""
    out = {}
    for rel, p, m, bwd, varlen in cases(profiles):
        short = "bwd" if bwd else "fwd"
        out[rel] = {role: e.format(short=short) for role, e in p["entries"].items()}
    return out


def write_tree(root, profiles=None):
    """Writes every contract under root (the folders as here); returns the paths written, relative."""
    written = []
    for rel, text in contracts(profiles).items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path) or root, exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        written.append(rel)
    return written


def committed(root=HERE):
    """Every *.toml under root, relative to it."""
    found = []
    for folder, _, files in os.walk(root):
        found += [os.path.relpath(os.path.join(folder, f), root) for f in files if f.endswith(".toml")]
    return sorted(found)


def compare_trees(generated, here=HERE):
    """What differs between a freshly written tree and the committed files: a list of lines, empty when
    they are byte-identical and no committed *.toml lacks a profile that writes it."""
    problems = []
    want, have = set(committed(generated)), set(committed(here))
    for rel in sorted(want | have):
        if rel not in have:
            problems.append("%s: missing (generate.py writes it)" % rel)
        elif rel not in want:
            problems.append("%s: no profile writes it (add its row to PROFILES, or delete it)" % rel)
        else:
            with open(os.path.join(generated, rel), "rb") as a, open(os.path.join(here, rel), "rb") as b:
                if a.read() != b.read():
                    problems.append("%s: differs from what generate.py writes" % rel)
    return problems


def main(argv):
    args = argv[1:]
    if args == ["--check"]:
        with tempfile.TemporaryDirectory() as tmp:
            write_tree(tmp)
            problems = compare_trees(tmp)
        if problems:
            sys.exit("glr/contracts: out of date, rerun glr/contracts/generate.py:\n  " + "\n  ".join(problems))
        return
    if args == ["--entries"]:
        for rel, e in entries().items():
            print(rel, " ".join("%s=%s" % kv for kv in sorted(e.items())))
        return
    if len(args) == 2 and args[0] == "--out":
        for rel in write_tree(args[1]):
            print("wrote", os.path.join(args[1], rel))
        return
    if args:
        sys.exit(__doc__)
    for rel, text in contracts().items():
        path = os.path.join(HERE, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        old = open(path).read() if os.path.exists(path) else None
        if old == text:
            continue
        with open(path, "w") as f:
            f.write(text)
        print("wrote", os.path.join("glr/contracts", rel))
    orphans = sorted(set(committed()) - set(contracts()))
    if orphans:
        sys.exit("glr/contracts: no profile writes " + " ".join(orphans) + " (add its row to PROFILES, or delete it)")


if __name__ == "__main__":
    main(sys.argv)
