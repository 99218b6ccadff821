#!/usr/bin/env python3
# tests/glr_sm90/bwd_rounding_model.py: a float64 model of the sm90 backward's bf16 roundings (the chunked formulas of
# bwd_formulas_check.py with T, h, dh', X, V_new, e^{G_L-G} V_new, P^T, dV_new, dX, the scaled dO and dX, dA and E
# rounded to bf16 where the kernels round them; X, and V_new and dh' in the V_new dh'^T term of dk, in two bf16
# pieces, hi + residual, as the kernels keep them since the H200's kgate sweep at 1e-3), against the same formulas unrounded: how the normwise errors grow
# with T and vary with the inputs, at shapes the host emulator cannot reach. Not a test; the error bounds of
# emu_bwd_check.cpp and bench/glr/sm90_bwd_check.cu come from it (bench/glr/sm90_bwd_notes.md).
# Usage: /usr/bin/python3 tests/glr_sm90/bwd_rounding_model.py T mu [seed [dh2]]   (T 4096: about a minute; dh2: the
# dh update as dh2_kernel's 2-GEMM chain, gdn_bwd_dh2.cuh, with its roundings: W, T diag(beta e^G), z0, u')
import sys

import numpy as np
import torch

def bf(x): return torch.tensor(np.asarray(x), dtype=torch.float32).to(torch.bfloat16).to(torch.float64).numpy()
def sim(q, k, v, g, beta, h0, do, dht, scale, C, R):
    R2 = lambda x: R(x) + R(x - R(x))  # hi + residual (identity when R is)
    T, K = q.shape; V = v.shape[1]; NT = (T + C - 1)//C; Tp = NT*C
    pad = lambda x: np.concatenate([x, np.zeros((Tp - T,) + x.shape[1:])])
    q, k, v, g, beta, do = map(pad, (q, k, v, g, beta, do)); ch = lambda x, c: x[c*C:(c+1)*C]
    tri_s = np.tril(np.ones((C, C)), -1); tri = np.tril(np.ones((C, C)))
    Gs, Ts = [], []
    for c in range(NT):
        G = np.cumsum(ch(g, c)); Gam = np.exp(np.minimum(G[:, None]-G[None, :], 0))*tri
        L = tri_s*(ch(beta, c)[:, None]*(ch(k, c)@ch(k, c).T)*Gam)
        Gs.append(G); Ts.append(R(np.linalg.inv(np.eye(C)+L)))
    hs, vns = [], []; S = h0.copy()
    for c in range(NT):
        G, Tm, Kc, b = Gs[c], Ts[c], ch(k, c), ch(beta, c)
        Sb = R(S); hs.append(Sb)
        X = R2(b[:, None]*ch(v, c) - (b*np.exp(G))[:, None]*(Kc@Sb)); Vn = Tm@X; vns.append((R(Vn), R2(Vn)))
        S = np.exp(G[-1])*S + Kc.T@R(np.exp(G[-1]-G)[:, None]*Vn)
    dS = dht.copy(); dhs, dXs = [None]*NT, [None]*NT; dv = np.zeros((Tp, V)); dbeta = np.zeros(Tp)
    for c in reversed(range(NT)):
        G, Tm, Kc, Qc, b, dOc = Gs[c], Ts[c], ch(k, c), ch(q, c), ch(beta, c), ch(do, c)
        dSb = R(dS); dhs[c] = (dSb, R2(dS))
        Gam = np.exp(np.minimum(G[:, None]-G[None, :], 0))*tri
        Pt = R((scale*Gam*(Qc@Kc.T)).T)
        dVn = R(Pt@dOc + np.exp(G[-1]-G)[:, None]*(Kc@dSb)); dX = Tm.T@dVn
        dXs[c] = R(dX); dv[c*C:(c+1)*C] = b[:, None]*dX; dbeta[c*C:(c+1)*C] = np.sum(dX*ch(v, c), 1)
        if not DH2:
            dS = np.exp(G[-1])*dS + Qc.T@R(scale*np.exp(G)[:, None]*dOc) - Kc.T@R((b*np.exp(G))[:, None]*dX)
        else:  # dh2_kernel's 2-GEMM chain: e^{G_L} dh' + Q^T y + K^T z0 + W^T u', W = T diag(beta e^G) K
            W = R(R(Tm*(b*np.exp(G))[None, :])@Kc); z0 = R(-(b*np.exp(G))[:, None]*(Tm.T@R(Pt@dOc)))
            dS = (np.exp(G[-1])*dS + Qc.T@R(scale*np.exp(G)[:, None]*dOc) + Kc.T@z0
                  + W.T@R(-np.exp(G[-1]-G)[:, None]*(Kc@dSb)))
    dh0 = dS; dq = np.zeros((Tp, K)); dk = np.zeros((Tp, K)); dg = np.zeros(Tp)
    for c in range(NT):
        G, Kc, Qc, b, dOc = Gs[c], ch(k, c), ch(q, c), ch(beta, c), ch(do, c)
        S, (dS1, dS2), (Vn, Vn2), dX = hs[c], dhs[c], vns[c], dXs[c]; eG, eL = np.exp(G), np.exp(G[-1]-G)
        Gam = np.exp(np.minimum(G[:, None]-G[None, :], 0)); QK, KK = Qc@Kc.T, Kc@Kc.T
        dP = dOc@Vn.T; dL = -(dX@Vn.T); P = scale*tri*Gam*QK; dA = R(scale*tri*Gam*dP)
        D = tri_s*Gam*KK*dL; E = R(tri_s*b[:, None]*Gam*dL); MP, ML = tri*dP*P, b[:, None]*D
        Y1, Y2, Y3 = dOc@S.T, dX@S.T, Vn2@dS2.T
        dG = (scale*eG*np.sum(Qc*Y1, 1) - b*eG*np.sum(Kc*Y2, 1) - eL*np.sum(Kc*Y3, 1) + MP.sum(1)-MP.sum(0)+ML.sum(1)-ML.sum(0))
        dG[-1] += np.sum(eL*np.sum(Kc*Y3, 1)) + np.exp(G[-1])*np.sum(S*dS1)
        dbeta[c*C:(c+1)*C] += D.sum(1) - eG*np.sum(Kc*Y2, 1)
        dq[c*C:(c+1)*C] = scale*eG[:, None]*Y1 + dA@Kc
        dk[c*C:(c+1)*C] = -(b*eG)[:, None]*Y2 + eL[:, None]*Y3 + E@Kc + E.T@Kc + dA.T@Qc
        dg[c*C:(c+1)*C] = np.cumsum(dG[::-1])[::-1]
    return dq[:T], dk[:T], dv[:T], dg[:T], dbeta[:T], dh0
T, mu = int(sys.argv[1]), float(sys.argv[2]); K = V = 128; C = 64
DH2 = len(sys.argv) > 4 and sys.argv[4] == "dh2"  # the dh update as dh2_kernel's 2-GEMM chain (GLR_DH_2GEMM=1)
rng = np.random.default_rng(int(sys.argv[3]) if len(sys.argv) > 3 else 5)
q = rng.standard_normal((T, K)); q /= np.linalg.norm(q, axis=1, keepdims=True)
k = rng.standard_normal((T, K)); k /= np.linalg.norm(k, axis=1, keepdims=True)
v = rng.standard_normal((T, V)); g = -np.log1p(np.exp(-(mu+rng.standard_normal(T)))); beta = 1/(1+np.exp(-rng.standard_normal(T)))
h0 = 0.1*rng.standard_normal((K, V)); do = rng.standard_normal((T, V)); dht = rng.standard_normal((K, V))
q, k, v, do = bf(q), bf(k), bf(v), bf(do)
ref = sim(q, k, v, g, beta, h0, do, dht, K**-0.5, C, lambda x: x)
got = sim(q, k, v, g, beta, h0, do, dht, K**-0.5, C, bf)
print(f"T{T} mu{mu:+.0f}:", "  ".join(f"{n} {np.linalg.norm(x-r)/np.linalg.norm(r):.2e}" for n, r, x in zip(["dq","dk","dv","dg","dbeta","dh0"], ref, got)))
