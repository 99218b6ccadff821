"""glr's PyTorch ops against the float64 oracle: outputs, gradients through autograd, gradcheck, dtypes,
strides, Meta kernels, and the errors a bad call gets."""
import pytest
import torch

import glr
from conftest import SHAPES, make_problem, op_args, rel


def grads_of(p, o, ht, dout, dht):
    inputs = [p[n] for n in ("q", "k", "v", "g", "beta", "initial_state") if p[n] is not None]
    outs, grads = [o], [dout]
    if ht is not None and dht is not None:
        outs.append(ht)
        grads.append(dht)
    return torch.autograd.grad(outs, inputs, grads)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(str(x) for x in s[:6]) + ("-varlen" if s[6] else ""))
def test_forward_and_autograd_match_oracle(member, shape):
    B, T, H, HV, K, V, cu = shape
    p = make_problem(member, B, T, H, HV, K, V, cu, initial_state=True, requires_grad=True)
    o, ht = glr.recurrence(p["q"], p["k"], p["v"], p["g"], p["beta"], initial_state=p["initial_state"],
                           output_final_state=True, cu_seqlens=p["cu_seqlens"])
    o_ref, ht_ref = torch.ops.glr.oracle_fwd(*op_args(p), True)
    assert rel(o, o_ref) < 1e-12 and rel(ht, ht_ref) < 1e-12
    dout, dht = torch.randn_like(o), torch.randn_like(ht)
    got = grads_of(p, o, ht, dout, dht)
    want = [w for w in torch.ops.glr.oracle_bwd(*op_args(p)[:7], dout, dht, *op_args(p)[7:]) if w.numel() > 0]
    assert len(got) == len(want)
    for name, a, b in zip(("dq", "dk", "dv", "dg/dbeta/dh0", "", ""), got, want):
        assert a.shape == b.shape, name
        assert rel(a, b) < 1e-10, (name, rel(a, b))


def test_broadcast_output_gradient_and_empty_sequences():
    """o.sum() hands backward a stride-0 gradient; T = 0 passes the initial state through both ways."""
    p = make_problem("gdn", 2, 70, 1, 2, 4, 4, requires_grad=True)
    o, _ = glr.recurrence(p["q"], p["k"], p["v"], p["g"], p["beta"])
    o.sum().backward()
    want = torch.ops.glr.oracle_bwd(*op_args(p)[:7], torch.ones_like(o), None, *op_args(p)[7:])
    assert rel(p["q"].grad, want[0]) < 1e-12 and rel(p["beta"].grad, want[4]) < 1e-12
    p = make_problem("gdn", 2, 0, 1, 2, 4, 4, initial_state=True, requires_grad=True)
    o, ht = glr.recurrence(p["q"], p["k"], p["v"], p["g"], p["beta"], initial_state=p["initial_state"],
                           output_final_state=True)
    assert o.shape == (2, 0, 2, 4) and torch.equal(ht, p["initial_state"])
    ht.sum().backward()
    assert torch.equal(p["initial_state"].grad, torch.ones_like(ht))


def test_oracle_is_not_the_chunked_code():
    """The oracle and the op share no code path: a wrong scale in one shows up (the check can fail)."""
    p = make_problem("gdn", 1, 70, 1, 1, 4, 4)
    o, _ = torch.ops.glr.fwd(*op_args(p), False)
    o_ref, _ = torch.ops.glr.oracle_fwd(*op_args(p, scale=0.51), False)
    assert rel(o, o_ref) > 1e-3


@pytest.mark.parametrize("varlen", [False, True])
def test_gradcheck_float64(member, varlen):
    cu = [0, 3, 3, 70] if varlen else None
    p = make_problem(member, 1 if varlen else 2, 70, 1, 2, 3, 2, cu, initial_state=True, requires_grad=True)
    names = [n for n in ("q", "k", "v", "g", "beta", "initial_state") if p[n] is not None]

    def f(*xs):
        d = dict(p, **dict(zip(names, xs)))
        return glr.recurrence(d["q"], d["k"], d["v"], d["g"], d["beta"], initial_state=d["initial_state"],
                              output_final_state=True, cu_seqlens=d["cu_seqlens"])

    assert torch.autograd.gradcheck(f, [p[n] for n in names], eps=1e-6, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-5), (torch.bfloat16, 3e-2)])
def test_low_precision_cpu(member, dtype, tol):
    p64 = make_problem(member, 2, 100, 2, 4, 8, 8, seed=11)
    p = make_problem(member, 2, 100, 2, 4, 8, 8, seed=11, dtype=dtype)
    o, ht = torch.ops.glr.fwd(*op_args(p), True)
    o_ref, ht_ref = torch.ops.glr.oracle_fwd(*op_args(p64), True)
    assert o.dtype == dtype and ht.dtype == torch.float32
    # bf16 inputs are rounded before the call: judge against the oracle on the rounded inputs
    p_rounded = {n: (t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t) for n, t in p.items()}
    o_ref, ht_ref = torch.ops.glr.oracle_fwd(*op_args(p_rounded), True)
    assert rel(o, o_ref) < tol and rel(ht, ht_ref) < tol


def test_strided_inputs_give_the_same_result(member):
    p = make_problem(member, 2, 70, 2, 4, 8, 6, seed=3)
    o, ht = torch.ops.glr.fwd(*op_args(p), True)
    s = dict(p)
    s["q"] = p["q"].transpose(0, 1).contiguous().transpose(0, 1)  # batch stride smaller than token stride
    s["v"] = torch.cat([p["v"], p["v"]], dim=-1)[..., : p["v"].shape[-1]]  # padded rows
    if p["g"] is not None and p["g"].dim() == 3:
        s["g"] = p["g"][:, :, :1].expand_as(p["g"])  # stride-0 broadcast
        o_want, _ = torch.ops.glr.fwd(*op_args(dict(s, g=s["g"].contiguous())), True)
    else:
        o_want = o
    o2, _ = torch.ops.glr.fwd(*op_args(s), True)
    assert not s["q"].is_contiguous() and not s["v"].is_contiguous()
    assert torch.equal(o2, o_want)


def test_meta_kernels_give_shapes_and_dtypes(member):
    for B, T, H, HV, K, V, cu in SHAPES:
        for dtype in (torch.float32, torch.bfloat16):
            p = make_problem(member, B, T, H, HV, K, V, cu, initial_state=True, dtype=dtype)
            meta = {n: (t.to("meta") if isinstance(t, torch.Tensor) else t) for n, t in p.items()}
            args, margs = op_args(p), op_args(meta)
            # fwd and bwd are the non-differentiable halves: called directly below autograd (PyTorch 1.13
            # has no Autograd fallback for meta tensors)
            with torch.inference_mode():
                got = torch.ops.glr.fwd(*margs, True)
                want = torch.ops.glr.fwd(*args, True)
                for a, b in zip(got, want):
                    assert a.device.type == "meta" and a.shape == b.shape and a.dtype == b.dtype
                dout, dht = torch.randn_like(want[0]), torch.randn_like(want[1])
                got = torch.ops.glr.bwd(*margs[:7], dout.to("meta"), dht.to("meta"), *margs[7:])
                want = torch.ops.glr.bwd(*args[:7], dout, dht, *args[7:])
                for a, b in zip(got, want):
                    assert a.device.type == "meta" and a.shape == b.shape and a.dtype == b.dtype
            # the autograd op on meta tensors traces forward and backward to the Meta kernels
            mq = meta["q"].requires_grad_(True)
            o, ht = torch.ops.glr.recurrence(mq, *margs[1:], True)
            (gq,) = torch.autograd.grad([o, ht], [mq], [torch.empty_like(o), torch.empty_like(ht)])
            assert gq.shape == mq.shape and gq.device.type == "meta"


def bad(member="gdn", **change):
    p = make_problem(member, 2, 10, 2, 4, 4, 4, seed=1)
    p.update(change)
    return p


ERRORS = [
    ("k dtype", lambda: bad(k=bad()["k"].float()), "glr.fwd: k: dtype Float differs from q's Double"),
    ("q int", lambda: bad(q=bad()["q"].long(), k=bad()["k"].long(), v=bad()["v"].long()), "q: dtype Long"),
    ("q rank", lambda: bad(q=bad()["q"][0]), "q: expected 4 dimensions"),
    ("k shape", lambda: bad(k=bad()["k"][:, :9]), "k: expected shape [2, 10, 2, 4]"),
    ("HV % H", lambda: bad(v=torch.randn(2, 10, 3, 4, dtype=torch.float64),
                          g=torch.randn(2, 10, 3, dtype=torch.float64),
                          beta=torch.rand(2, 10, 3, dtype=torch.float64)), "multiple of the query/key heads H = 2"),
    ("beta shape", lambda: bad(beta=bad()["beta"][:, :, :2]), "beta: expected shape [2, 10, 4] (B, T, HV)"),
    ("beta missing", lambda: (bad(beta=None), {"delta": True}), "beta: missing"),
    ("g missing", lambda: (bad(g=None), {"gate": 1}), "g: missing (gate = 1 needs the log-decay)"),
    ("g for linear", lambda: (bad("linear", g=torch.zeros(2, 10, 4, dtype=torch.float64)), {"gate": 0}),
     "g: given, but this member has no gate"),
    ("g per head shape", lambda: bad(g=torch.zeros(3, dtype=torch.float64)), "g: expected shape [4] (HV"),
    ("h0 dtype", lambda: bad(initial_state=torch.zeros(2, 4, 4, 4)), "h0: dtype Float must be Double"),
    ("h0 shape", lambda: bad(initial_state=torch.zeros(3, 4, 4, 4, dtype=torch.float64)), "h0: expected shape [2, 4, 4, 4]"),
    ("device", lambda: bad(v=bad()["v"].to("meta")), "v: on meta but q is on cpu"),
    ("cu dtype", lambda: bad(cu_seqlens=torch.tensor([0.0, 10.0])), "cu_seqlens: dtype Float is not int64 or int32"),
    ("cu with B=2", lambda: bad(cu_seqlens=torch.tensor([0, 10])), "cu_seqlens: packed sequences need B = 1"),
]


def packed(cu):
    p = make_problem("gdn", 1, 10, 2, 4, 4, 4, seed=1)
    p["cu_seqlens"] = torch.tensor(cu)
    return p


ERRORS += [
    ("cu decreasing", lambda: packed([0, 6, 4, 10]), "glr.fwd: glr: cu_seqlens: offsets must be non-decreasing"),
    ("cu end", lambda: packed([0, 4, 9]), "cu_seqlens"),
    ("cu start", lambda: packed([1, 10]), "cu_seqlens[0] must be 0"),
    ("cu int32 one entry", lambda: packed(torch.tensor([0], dtype=torch.int32).tolist()), "cu_seqlens: expected 1 dimension with N + 1 >= 2"),
]


@pytest.mark.parametrize("name,make,message", ERRORS, ids=[e[0] for e in ERRORS])
def test_bad_calls_fail_with_one_clear_line(name, make, message):
    made = make()
    p, flags = made if isinstance(made, tuple) else (made, {})
    args = op_args(p)
    args[8] = flags.get("delta", args[8])
    args[9] = flags.get("gate", args[9])
    with pytest.raises(RuntimeError) as e:
        torch.ops.glr.recurrence(*args, True)  # the user's entry: through autograd to fwd's kernels
    first = str(e.value).splitlines()[0]
    assert message in first, first


def test_backward_checks_dout():
    p = make_problem("gdn", 2, 10, 2, 4, 4, 4, seed=1)
    args = op_args(p)
    with pytest.raises(RuntimeError, match="dout: expected shape"):
        torch.ops.glr.bwd(*args[:7], torch.zeros(2, 10, 4, 5, dtype=torch.float64), None, *args[7:])


def test_oracle_refuses_float32():
    p = make_problem("gdn", 1, 4, 1, 1, 2, 2, dtype=torch.float32)
    with pytest.raises(RuntimeError, match="oracle runs in float64 only"):
        torch.ops.glr.oracle_fwd(*op_args(p), False)


def test_inference_mode_runs_below_autograd():
    p = make_problem("retnet", 1, 20, 1, 2, 4, 4, seed=2)
    with torch.inference_mode():
        o, _ = torch.ops.glr.recurrence(*op_args(p), False)
    o_ref, _ = torch.ops.glr.oracle_fwd(*op_args(p), False)
    assert rel(o, o_ref) < 1e-12


@pytest.mark.skipif(not hasattr(torch, "compile"), reason="torch.compile needs PyTorch 2 (Debian ships 1.13)")
def test_compile_fullgraph_cpu():
    p = make_problem("gdn", 1, 70, 1, 2, 4, 4, seed=4, dtype=torch.float32, requires_grad=True)

    def f(q, k, v, g, beta):
        return glr.chunk_gated_delta_rule(q, k, v, g, beta)[0].sum()

    args = [p[n] for n in ("q", "k", "v", "g", "beta")]
    eager = torch.autograd.grad(f(*args), args)
    compiled = torch.autograd.grad(torch.compile(f, fullgraph=True)(*args), args)
    for a, b in zip(eager, compiled):
        assert rel(a, b) < 1e-6
