# Device diagnosis of glr.bwd_saved's cudaErrorInvalidValue at B1 T32768 H16 HV32 (side_by_side 2026-12-05 15:00).
import os, sys, traceback
sys.path.insert(0, os.path.join(os.getcwd(), "build-py", "glr-gpu"))
import torch
import glr  # noqa
which = sys.argv[1] if len(sys.argv) > 1 else "all"
cases = [(1, 32768, 16, 32), (1, 32768, 16, 16), (1, 8192, 16, 32), (1, 16384, 16, 32), (2, 16384, 16, 32), (4, 8192, 16, 32)]
if which != "all":
    cases = [tuple(int(x) for x in which.split(","))]
modes = sys.argv[2].split(",") if len(sys.argv) > 2 else ["saved", "plain", "autograd"]
for (B, T, H, HV) in cases:
    torch.manual_seed(0)
    K = V = 128
    q = torch.nn.functional.normalize(torch.randn(B, T, H, K, device="cuda"), dim=-1).bfloat16()
    k = torch.nn.functional.normalize(torch.randn(B, T, H, K, device="cuda"), dim=-1).bfloat16()
    v = torch.randn(B, T, HV, V, device="cuda").bfloat16()
    g = torch.nn.functional.logsigmoid(torch.randn(B, T, HV, device="cuda")).float()
    beta = torch.sigmoid(torch.randn(B, T, HV, device="cuda")).bfloat16()
    do = torch.randn(B, T, HV, V, device="cuda").bfloat16()
    scale = K ** -0.5
    for mode in modes:
        tag = f"B{B} T{T} H{H} HV{HV} {mode} split={os.environ.get('GLR_BACKWARD_SPLIT', 'rule')}"
        try:
            if mode == "saved":
                o, ht, saved, key = torch.ops.glr.fwd_save(q, k, v, g, beta, None, None, scale, True, 1, False)
                torch.cuda.synchronize()
                r = torch.ops.glr.bwd_saved(q, k, v, g, beta, None, None, do, None, scale, True, 1, saved, key)
            elif mode == "plain":
                o, ht = torch.ops.glr.fwd(q, k, v, g, beta, None, None, scale, True, 1, False)
                torch.cuda.synchronize()
                r = torch.ops.glr.bwd(q, k, v, g, beta, None, None, do, None, scale, True, 1)
            else:
                L = [x.detach().requires_grad_(True) for x in (q, k, v, g, beta)]
                o = glr.chunk_gated_delta_rule(L[0], L[1], L[2], L[3], L[4], scale=scale)[0]
                o.backward(do)
            torch.cuda.synchronize()
            print(tag, "OK", flush=True)
        except Exception as e:
            print(tag, "ERROR", str(e).splitlines()[0][:300], flush=True)
