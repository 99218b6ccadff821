"""The CUDA kernels through the ops (GPU machine only; skipped without a GPU): bf16 forward and backward of
every member against the float64 oracle (judged against the error of the fp32 reference recurrence on the same
bf16 inputs, not a bare epsilon), the caller's stream honoured, packed sequences with device offsets, and a
torch.compile(fullgraph=True) training step of every member's layer with no graph break."""
import pytest
import torch

import glr
from conftest import SHAPES, make_problem, op_args, rel
from glr.layers import LanguageModel
from glr.reference import recurrence_reference

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

GPU_SHAPES = [(2, 200, 2, 4, 64, 64, None), (1, 300, 2, 2, 128, 128, None), (1, 330, 1, 2, 64, 64, [0, 7, 7, 200, 330])]


def to_cuda(p, dtype):
    out = {}
    for n, t in p.items():
        if t is None:
            out[n] = None
        elif n == "cu_seqlens":
            out[n] = t.cuda()
        elif n == "initial_state":
            out[n] = t.float().cuda().requires_grad_(True)
        elif n in ("g", "beta"):
            out[n] = t.float().cuda().requires_grad_(True)
        else:
            out[n] = t.to(dtype).cuda().requires_grad_(True)
    return out


@cuda
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=["gva", "k128", "varlen"])
def test_cuda_bf16_against_oracle(member, shape):
    B, T, H, HV, K, V, cu = shape
    p64 = make_problem(member, B, T, H, HV, K, V, cu, initial_state=True)
    p = to_cuda(p64, torch.bfloat16)
    # the oracle on exactly the bf16-rounded inputs
    r = {n: (t.detach().double().cpu() if isinstance(t, torch.Tensor) and t.is_floating_point() else
             (t.cpu() if isinstance(t, torch.Tensor) else t)) for n, t in p.items()}
    o, ht = glr.recurrence(p["q"], p["k"], p["v"], p["g"], p["beta"], initial_state=p["initial_state"],
                           output_final_state=True, cu_seqlens=p["cu_seqlens"])
    o_ref, ht_ref = torch.ops.glr.oracle_fwd(*op_args(r), True)
    # the error a plain fp32 recurrence on the same inputs makes, then rounded to bf16 as the op's output is
    o32, _ = recurrence_reference(*[r[n].float() if r[n] is not None and n != "cu_seqlens" else r[n]
                                    for n in ("q", "k", "v", "g", "beta")], initial_state=r["initial_state"].float(),
                                  output_final_state=True, cu_seqlens=r["cu_seqlens"])
    floor = rel(o32.to(torch.bfloat16), o_ref)
    assert rel(o.cpu(), o_ref) < 4 * floor + 1e-3, (rel(o.cpu(), o_ref), floor)
    assert rel(ht.cpu(), ht_ref) < 1e-2
    dout, dht = torch.randn_like(o), torch.randn_like(ht)
    names = [n for n in ("q", "k", "v", "g", "beta", "initial_state") if p[n] is not None]
    got = torch.autograd.grad([o, ht], [p[n] for n in names], [dout, dht])
    want = [w for w in torch.ops.glr.oracle_bwd(*op_args(r)[:7], dout.double().cpu(), dht.double().cpu(),
                                                 *op_args(r)[7:]) if w.numel() > 0]
    for n, a, b in zip(names, got, want):
        assert rel(a.cpu(), b) < 3e-2, (n, rel(a.cpu(), b))


@cuda
def test_cuda_honours_the_current_stream():
    """The op's input is written on a side stream after a long sleep; an op that ran on any other stream
    would read the zeros it held before and give a different output."""
    p = to_cuda(make_problem("gdn", 2, 256, 2, 2, 64, 64, seed=1), torch.bfloat16)
    with torch.no_grad():
        ref, _ = glr.recurrence(p["q"], p["k"], p["v"], p["g"], p["beta"])
        q_late = torch.zeros_like(p["q"])
        torch.cuda.synchronize()
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            torch.cuda._sleep(200_000_000)
            q_late.copy_(p["q"])
            o, _ = glr.recurrence(q_late, p["k"], p["v"], p["g"], p["beta"])
        torch.cuda.synchronize()
    assert torch.equal(o, ref)


@cuda
def test_cuda_errors_are_one_line():
    p = to_cuda(make_problem("gdn", 1, 64, 1, 1, 32, 32, seed=2), torch.bfloat16)
    with pytest.raises(RuntimeError) as e:
        glr.recurrence(p["q"], p["k"], p["v"], p["g"], p["beta"])
    assert str(e.value).splitlines()[0].startswith("glr.fwd: glr: K")


@cuda
@pytest.mark.parametrize("member", sorted(glr.MEMBERS))
def test_compiled_training_step_has_no_graph_break(member):
    torch.manual_seed(0)
    model = LanguageModel(member, vocab=64, d_model=128, n_layers=2, head_dim=64).cuda()
    compiled = torch.compile(model, fullgraph=True)  # raises on a graph break
    x = torch.randint(0, 64, (2, 128), device="cuda")
    loss = torch.nn.functional.cross_entropy(compiled(x).float().flatten(0, 1), x.flatten())
    loss.backward()
    eager = torch.nn.functional.cross_entropy(model(x).float().flatten(0, 1), x.flatten())
    assert abs(loss.item() - eager.item()) < 1e-2 * abs(eager.item())
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
