"""The dispatch through the ops: glr.forward_path and glr.backward_path say which kernels a call's forward and
backward run and why ("cpu: ...", "sm90: ...", "blocks: ..."). On an sm_90 GPU, bf16 calls with K = V (64 or 128)
and dense layouts take the tensor-core forward (every member, grouped value heads, packed sequences, states); the
outputs match the block programs' (GLR_FORWARD_PATH=blocks) and the float64 oracle within bf16 bounds. Gated
DeltaNet and DeltaNet calls with g and beta each fp32 or bf16, K = V (64 or 128), HV a multiple of H, with or without
cu_seqlens, take the tensor-core backward; its gradients match the block programs' (GLR_BACKWARD_PATH=blocks) and the float64 oracle within their
bounds. The CPU tests run everywhere; the CUDA ones skip without a GPU."""
import os
from contextlib import contextmanager

import pytest
import torch

import glr
from conftest import make_problem, op_args, rel

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

# The sm90 forward's bound (bench/glr/sm90_fwd_check.cu, tests/glrcuda/shapes.hpp): 8 u with u = 2^-9.
SM90_BOUND = 8 * 2.0 ** -9


# The sm90 backward's bounds (bench/glr/sm90_bwd_notes.md, tests/glrcuda/shapes.hpp): 8 u, and 16 u for dg.
SM90_BWD_BOUND = {"dq": 8 * 2.0 ** -9, "dk": 8 * 2.0 ** -9, "dv": 8 * 2.0 ** -9, "dg": 16 * 2.0 ** -9,
                  "dbeta": 8 * 2.0 ** -9, "dh0": 8 * 2.0 ** -9}


@contextmanager
def path_env(variable, value):
    old = os.environ.get(variable)
    if value is None:
        os.environ.pop(variable, None)
    else:
        os.environ[variable] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = old


def forward_path_env(value):
    return path_env("GLR_FORWARD_PATH", value)


def backward_path_env(value):
    return path_env("GLR_BACKWARD_PATH", value)


def kwargs_of(p):
    return dict(g=p["g"], beta=p["beta"], initial_state=p["initial_state"], output_final_state=True,
                cu_seqlens=p["cu_seqlens"])


def test_cpu_forward_path_names_the_cpu_algorithm(member):
    p = make_problem(member, 1, 20, 1, 2, 4, 4, initial_state=True)
    path = glr.forward_path(p["q"], p["k"], p["v"], **kwargs_of(p))
    assert path.startswith("cpu: "), path
    assert "float64" in path
    p32 = make_problem(member, 1, 20, 1, 2, 4, 4, dtype=torch.float32)
    assert "float32" in glr.forward_path(p32["q"], p32["k"], p32["v"], **kwargs_of(p32))


def test_forward_path_checks_its_arguments_as_fwd_does():
    p = make_problem("gdn", 2, 20, 1, 2, 4, 4)
    bad_beta = p["beta"][:, :, :1]
    with pytest.raises(RuntimeError) as fwd:
        glr.recurrence(p["q"], p["k"], p["v"], p["g"], bad_beta)
    with pytest.raises(RuntimeError) as path:
        glr.forward_path(p["q"], p["k"], p["v"], p["g"], bad_beta)
    # the same one-line message, under the op's own name
    assert "beta" in str(path.value) and "glr.forward_path" in str(path.value)
    assert str(fwd.value).split(": ", 1)[1].split("\n")[0] == str(path.value).split(": ", 1)[1].split("\n")[0]


def on_sm90():
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


def to_cuda_bf16(p):
    out = {}
    for n, t in p.items():
        if t is None:
            out[n] = None
        elif n == "cu_seqlens":
            out[n] = t.cuda()
        elif n in ("g", "beta", "initial_state"):
            out[n] = t.float().cuda()
        else:
            out[n] = t.to(torch.bfloat16).cuda()
    return out


# (B, T, H, HV, K, V, cu_seqlens): dense with GVA, packed sequences (an empty one, chunk edges), T = 1.
FAST_SHAPES = [(2, 300, 2, 4, 128, 128, None), (1, 400, 1, 2, 128, 128, [0, 1, 64, 64, 129, 400]),
               (3, 1, 1, 1, 128, 128, None), (2, 200, 1, 2, 64, 64, None)]


@cuda
@pytest.mark.parametrize("shape", FAST_SHAPES, ids=["gva", "varlen", "T1", "k64"])
def test_cuda_forward_takes_sm90_and_matches_the_block_programs(member, shape):
    B, T, H, HV, K, V, cu = shape
    p = to_cuda_bf16(make_problem(member, B, T, H, HV, K, V, cu, initial_state=True))
    path = glr.forward_path(p["q"], p["k"], p["v"], **kwargs_of(p))
    assert path.startswith("sm90: " if on_sm90() else "blocks: "), path
    o, ht = glr.recurrence(p["q"], p["k"], p["v"], **kwargs_of(p))
    o2, ht2 = glr.recurrence(p["q"], p["k"], p["v"], **kwargs_of(p))
    assert torch.equal(o, o2) and torch.equal(ht, ht2), "forward not bitwise deterministic"
    with forward_path_env("blocks"):
        forced = glr.forward_path(p["q"], p["k"], p["v"], **kwargs_of(p))
        assert forced.startswith("blocks: ") and "GLR_FORWARD_PATH" in forced, forced
        ob, htb = glr.recurrence(p["q"], p["k"], p["v"], **kwargs_of(p))
    r = {n: (t.double().cpu() if isinstance(t, torch.Tensor) and t.is_floating_point() else
             (t.cpu() if isinstance(t, torch.Tensor) else t)) for n, t in p.items()}
    o_ref, ht_ref = torch.ops.glr.oracle_fwd(*op_args(r), True)
    assert rel(o.cpu(), o_ref) < SM90_BOUND, rel(o.cpu(), o_ref)
    assert rel(ht.cpu(), ht_ref) < SM90_BOUND, rel(ht.cpu(), ht_ref)
    assert rel(o, ob) < 2 * SM90_BOUND and rel(ht, htb) < 2 * SM90_BOUND, (rel(o, ob), rel(ht, htb))


@cuda
def test_cuda_backward_after_the_sm90_forward_is_the_block_programs():
    # The autograd backward reads the sm90 forward's saved wy outputs (glr.fwd_save), or recomputes them after the
    # block programs' forward (nothing saved): its gradients do not depend on the forward's path, bit for bit.
    p = to_cuda_bf16(make_problem("gdn", 2, 200, 1, 2, 128, 128, initial_state=True))
    leaves = {n: t.clone().requires_grad_(True) for n, t in p.items() if n != "cu_seqlens" and t is not None}
    grads = []
    for env in (None, "blocks"):
        with forward_path_env(env):
            q = {n: (leaves[n] if n in leaves else p[n]) for n in p}
            o, ht = glr.recurrence(q["q"], q["k"], q["v"], **kwargs_of(q))
            grads.append(torch.autograd.grad([o, ht], list(leaves.values()),
                                             [torch.ones_like(o), torch.ones_like(ht)]))
    for a, b in zip(*grads):
        assert torch.equal(a, b)


@cuda
def test_cuda_bwd_saved_is_bwd_bit_for_bit():
    # glr.fwd_save leaves the forward's wy outputs T and G (glr_cuda.hpp Saved; the size is the same whichever path
    # the forward takes) and their key; glr.bwd_saved reads them instead of recomputing: the same gradients, bit for
    # bit. A key made for another problem is refused by name.
    p = to_cuda_bf16(make_problem("gdn", 2, 200, 1, 2, 128, 128, initial_state=True))
    args = op_args(p)
    o, ht, saved, key = torch.ops.glr.fwd_save(*args, True)
    assert saved.dtype == torch.uint8 and saved.is_cuda and key.dtype == torch.int64 and not key.is_cuda
    assert (key[0].item() != 0) == on_sm90(), key
    # T (bf16 64 x 64) and G (fp32 64) per chunk of each value head, nothing else: B2 x 4 chunks x HV 2
    slots = 2 * 4 * 2
    assert saved.numel() == slots * (64 * 64 * 2 + 64 * 4), saved.numel()
    gen = torch.Generator(device="cuda").manual_seed(7)
    dout = torch.randn(o.shape, generator=gen, device="cuda").to(o.dtype)
    dht = torch.randn(ht.shape, generator=gen, device="cuda")
    want = torch.ops.glr.bwd(*args[:7], dout, dht, *args[7:])
    got = torch.ops.glr.bwd_saved(*args[:7], dout, dht, *args[7:], saved, key)
    for a, b in zip(got, want):
        assert torch.equal(a, b)
    if on_sm90():
        other = key.clone()
        other[2] += 64  # T
        with pytest.raises(RuntimeError, match="saved"):
            torch.ops.glr.bwd_saved(*args[:7], dout, dht, *args[7:], saved, other)


@cuda
def test_cuda_forward_path_fallbacks_say_why():
    p = to_cuda_bf16(make_problem("gdn", 1, 100, 1, 1, 128, 64))
    path = glr.forward_path(p["q"], p["k"], p["v"], p["g"], p["beta"])
    assert path.startswith("blocks: "), path
    if on_sm90():
        assert "V = 64" in path, path
    p = to_cuda_bf16(make_problem("gdn", 1, 100, 2, 2, 128, 128))
    q_strided = p["q"].transpose(1, 2).contiguous().transpose(1, 2)  # [B, T, H, K] view of head-major memory
    path = glr.forward_path(q_strided, p["k"], p["v"], p["g"], p["beta"])
    assert path.startswith("blocks: "), path
    if on_sm90():
        assert "dense" in path, path
    path = glr.forward_path(p["q"].half(), p["k"].half(), p["v"].half(), p["g"], p["beta"])
    assert path.startswith("blocks: ") and (not on_sm90() or "bf16" in path), path
    with forward_path_env("fast"):
        with pytest.raises(RuntimeError, match="GLR_FORWARD_PATH"):
            glr.forward_path(p["q"], p["k"], p["v"], p["g"], p["beta"])


def test_cpu_backward_path_names_the_cpu_algorithm_and_checks_its_arguments(member):
    p = make_problem(member, 1, 20, 1, 2, 4, 4, initial_state=True)
    path = glr.backward_path(p["q"], p["k"], p["v"], **kwargs_of(p))
    assert path.startswith("cpu: ") and "float64" in path, path
    if p["beta"] is not None:
        with pytest.raises(RuntimeError, match="glr.backward_path"):
            glr.backward_path(p["q"], p["k"], p["v"], p["g"], p["beta"][:, :, :1])


# (B, T, H, K): the tensor-core backward's shapes (HV = H, K = V = 128): several chunks with a short last one, T = 1.
# (B, T, H, K, cu_seqlens): packed sequences (an empty one, a single token, chunk edges) since 2026-12-04.
# K = V = 64 (the kernels' kD = 64 instantiation), dense and packed.
BWD_FAST_SHAPES = [(2, 300, 2, 128, None), (3, 1, 1, 128, None), (1, 1000, 1, 128, None),
                   (1, 400, 1, 128, [0, 1, 64, 64, 129, 400]), (2, 300, 2, 64, None),
                   (1, 400, 1, 64, [0, 1, 64, 64, 129, 400])]


@cuda
@pytest.mark.parametrize("member_name", ["gdn", "deltanet"])
@pytest.mark.parametrize("shape", BWD_FAST_SHAPES, ids=["B2_T300_H2", "T1", "T1000", "varlen", "K64_B2_T300_H2",
                                                     "K64_varlen"])
@pytest.mark.parametrize("scalars", ["fp32", "bf16_beta", "bf16_g_beta"])
def test_cuda_backward_takes_sm90_and_matches_the_block_programs_and_the_oracle(member_name, shape, scalars):
    # scalars: g and beta fp32, bf16 beta with fp32 g (flash-linear-attention's), both bf16; dg, dbeta come back in
    # their dtypes, one bf16 rounding (2^-9) more in the sm90 bound. The oracle reads the same (rounded) values.
    B, T, H, K, cu = shape
    p = to_cuda_bf16(make_problem(member_name, B, T, H, H, K, K, cu, initial_state=True, seed=T + H))
    if scalars != "fp32":
        p["beta"] = p["beta"].to(torch.bfloat16)
    if scalars == "bf16_g_beta" and p["g"] is not None:
        p["g"] = p["g"].to(torch.bfloat16)
    path = glr.backward_path(p["q"], p["k"], p["v"], **kwargs_of(p))
    assert path.startswith("sm90: " if on_sm90() else "blocks: "), path
    leaves = {n: t.clone().requires_grad_(True) for n, t in p.items() if n != "cu_seqlens" and t is not None}
    gen = torch.Generator(device="cuda").manual_seed(5)

    def grads(env):
        with backward_path_env(env):
            q = {n: (leaves[n] if n in leaves else p[n]) for n in p}
            o, ht = glr.recurrence(q["q"], q["k"], q["v"], **kwargs_of(q))
            do = torch.randn(o.shape, generator=gen, device="cuda").to(o.dtype)
            dht = torch.randn(ht.shape, generator=gen, device="cuda")
            got = torch.autograd.grad([o, ht], list(leaves.values()), [do, dht])
        return dict(zip(leaves, got)), do, dht

    fast, do, dht = grads(None)
    gen.manual_seed(5)
    again, _, _ = grads(None)
    gen.manual_seed(5)
    blocks, _, _ = grads("blocks")
    for n in fast:
        assert torch.equal(fast[n], again[n]), f"d{n} not bitwise deterministic"
    r = {n: (t.double().cpu() if isinstance(t, torch.Tensor) and t.is_floating_point() else
             (t.cpu() if isinstance(t, torch.Tensor) else t)) for n, t in p.items()}
    args = op_args(r)
    ref = torch.ops.glr.oracle_bwd(*args[:7], do.double().cpu(), dht.cpu().double(), *args[7:])
    names = {"q": "dq", "k": "dk", "v": "dv", "g": "dg", "beta": "dbeta", "initial_state": "dh0"}
    for n, want in zip(["q", "k", "v", "g", "beta", "initial_state"], ref):
        if n not in fast:
            continue
        bound = SM90_BWD_BOUND[names[n]] if on_sm90() else 2 ** -8 + 1e-3
        if on_sm90() and n in ("g", "beta") and fast[n].dtype == torch.bfloat16:
            bound += 2.0 ** -9
        err, err_blocks = rel(fast[n].cpu(), want), rel(blocks[n].cpu(), want)
        assert err < bound, (names[n], err, bound)
        assert err_blocks < 2 ** -8 + 1e-3, (names[n], err_blocks)
        assert rel(fast[n], blocks[n]) < bound + 2 ** -8 + 1e-3, (names[n], rel(fast[n], blocks[n]))


@cuda
def test_cuda_backward_path_fallbacks_say_why():
    p = to_cuda_bf16(make_problem("gdn", 1, 100, 1, 2, 128, 128))
    path = glr.backward_path(p["q"], p["k"], p["v"], p["g"], p["beta"])  # grouped value heads (dense): taken
    assert path.startswith("sm90: " if on_sm90() else "blocks: ") and "value heads (" not in path, path
    p = to_cuda_bf16(make_problem("gdn", 1, 100, 1, 1, 128, 128))
    # bf16 beta (and g) no longer rule the sm90 backward out (2026-12-04)
    path = glr.backward_path(p["q"], p["k"], p["v"], p["g"], p["beta"].to(torch.bfloat16))
    assert path.startswith("sm90: " if on_sm90() else "blocks: "), path
    path = glr.backward_path(p["q"], p["k"], p["v"], p["g"].to(torch.bfloat16), p["beta"].to(torch.bfloat16))
    assert path.startswith("sm90: " if on_sm90() else "blocks: "), path
    # packed sequences no longer rule it out either (2026-12-04)
    path = glr.backward_path(p["q"], p["k"], p["v"], p["g"], p["beta"], cu_seqlens=torch.tensor([0, 30, 100]).cuda())
    assert path.startswith("sm90: " if on_sm90() else "blocks: ") and "packed" not in path, path
    # head dims: K = V = 64 or 128 taken (64 since 2026-12-04), others refused by name
    p = to_cuda_bf16(make_problem("gdn", 1, 100, 1, 2, 64, 64))
    path = glr.backward_path(p["q"], p["k"], p["v"], p["g"], p["beta"])
    assert path.startswith("sm90: " if on_sm90() else "blocks: "), path
    p = to_cuda_bf16(make_problem("gdn", 1, 100, 1, 1, 64, 128))
    path = glr.backward_path(p["q"], p["k"], p["v"], p["g"], p["beta"])
    assert path.startswith("blocks: "), path
    if on_sm90():
        assert "K = 64, V = 128 (takes K = V = 64 or 128)" in path, path
    # the members without the delta rule no longer rule it out either (2026-12-04)
    p = to_cuda_bf16(make_problem("mamba2", 1, 100, 1, 1, 128, 128))
    path = glr.backward_path(p["q"], p["k"], p["v"], p["g"], p["beta"])
    assert path.startswith("sm90: " if on_sm90() else "blocks: ") and "member" not in path, path
    with backward_path_env("blocks"):
        path = glr.backward_path(p["q"], p["k"], p["v"], p["g"], p["beta"])
        assert path.startswith("blocks: ") and "GLR_BACKWARD_PATH" in path, path
    with backward_path_env("fast"):
        with pytest.raises(RuntimeError, match="GLR_BACKWARD_PATH"):
            glr.backward_path(p["q"], p["k"], p["v"], p["g"], p["beta"])
