#!/usr/bin/env python3
# tests/glr_sm90/bwd_formulas_check.py: the chunked Gated DeltaNet backward of bench/glr/sm90_bwd_notes.md, in
# float64 numpy, exactly as the sm90 kernels (glr/cuda/sm90/gdn_bwd_mma.cuh) organise it (three passes: h_c and
# V_new forward; dS and dX in reverse; then per chunk dq, dk, dg, dbeta), against torch float64 autograd of the
# sequential recurrence. Run: /usr/bin/python3 tests/glr_sm90/bwd_formulas_check.py (a few seconds).
# Exits non-zero when any gradient differs by more than 1e-9 relative (float64 arithmetic, no rounding).
import sys

import numpy as np
import torch

torch.set_default_dtype(torch.float64)


def recurrent(q, k, v, g, beta, h0, scale):
    """S_t = e^{g_t} (I - b_t k_t k_t^T) S_{t-1} + b_t k_t v_t^T, o_t = scale S_t^T q_t (one head)."""
    S = h0
    outs = []
    for t in range(q.shape[0]):
        S = torch.exp(g[t]) * S
        u = beta[t] * (v[t] - S.T @ k[t])
        S = S + torch.outer(k[t], u)
        outs.append(scale * S.T @ q[t])
    return torch.stack(outs), S


def chunked_bwd(q, k, v, g, beta, h0, do, dht, scale, C):
    T, K = q.shape
    V = v.shape[1]
    NT = (T + C - 1) // C
    Tp = NT * C
    pad = lambda x: np.concatenate([x, np.zeros((Tp - T,) + x.shape[1:])])
    q, k, v, g, beta, do = map(pad, (q, k, v, g, beta, do))
    ch = lambda x, c: x[c * C:(c + 1) * C]
    # pass 0 (wy): G, T per chunk
    Gs, Ts = [], []
    tri_strict = np.tril(np.ones((C, C)), -1)
    tri = np.tril(np.ones((C, C)))
    for c in range(NT):
        G = np.cumsum(ch(g, c))
        Gam = np.exp(np.minimum(G[:, None] - G[None, :], 0.0)) * tri  # only j <= i used
        L = tri_strict * (ch(beta, c)[:, None] * (ch(k, c) @ ch(k, c).T) * Gam)
        Gs.append(G)
        Ts.append(np.linalg.inv(np.eye(C) + L))
    # pass 1 (forward, h_c and V_new)
    hs, vns = [], []
    S = h0.copy()
    for c in range(NT):
        G, Tm, Kc, b = Gs[c], Ts[c], ch(k, c), ch(beta, c)
        hs.append(S.copy())
        X = b[:, None] * ch(v, c) - (b * np.exp(G))[:, None] * (Kc @ S)
        Vn = Tm @ X
        vns.append(Vn)
        S = np.exp(G[-1]) * S + (np.exp(G[-1] - G)[:, None] * Kc).T @ Vn
    # pass 2 (reverse): dh_{c+1} (gradient of the state leaving chunk c), dX, dv, dbeta's V term
    dS = dht.copy()
    dhs, dXs = [None] * NT, [None] * NT
    dv = np.zeros((Tp, V))
    dbeta = np.zeros(Tp)
    for c in reversed(range(NT)):
        G, Tm, Kc, Qc, b, dOc = Gs[c], Ts[c], ch(k, c), ch(q, c), ch(beta, c), ch(do, c)
        dhs[c] = dS.copy()
        Gam = np.exp(np.minimum(G[:, None] - G[None, :], 0.0)) * tri
        Pt = (scale * Gam * (Qc @ Kc.T)).T  # P^T, upper triangular
        dVn = Pt @ dOc + np.exp(G[-1] - G)[:, None] * (Kc @ dS)
        dX = Tm.T @ dVn
        dXs[c] = dX
        dv[c * C:(c + 1) * C] = b[:, None] * dX
        dbeta[c * C:(c + 1) * C] = np.sum(dX * ch(v, c), axis=1)
        dS = (np.exp(G[-1]) * dS + Qc.T @ (scale * np.exp(G)[:, None] * dOc)
              - Kc.T @ ((b * np.exp(G))[:, None] * dX))
    dh0 = dS
    # pass 3 (per chunk)
    dq = np.zeros((Tp, K))
    dk = np.zeros((Tp, K))
    dg = np.zeros(Tp)
    for c in range(NT):
        G, Kc, Qc, b, dOc = Gs[c], ch(k, c), ch(q, c), ch(beta, c), ch(do, c)
        S, dS1, Vn, dX = hs[c], dhs[c], vns[c], dXs[c]
        eG, eL = np.exp(G), np.exp(G[-1] - G)
        Gam = np.exp(np.minimum(G[:, None] - G[None, :], 0.0))
        QK, KK = Qc @ Kc.T, Kc @ Kc.T
        dP = dOc @ Vn.T
        dL = -(dX @ Vn.T)
        P = scale * tri * Gam * QK
        Lm = tri_strict * b[:, None] * Gam * KK
        dA = scale * tri * Gam * dP                 # dP . dP/d(QK^T)
        D = tri_strict * Gam * KK * dL              # dbeta_i += sum_j D_ij;  dL . L = diag(beta) D
        E = tri_strict * b[:, None] * Gam * dL      # dL . dL/d(KK^T)
        MP, ML = tri * dP * P, b[:, None] * D
        Y1 = dOc @ S.T        # (C, K)
        Y2 = dX @ S.T
        Y3 = Vn @ dS1.T
        dG = (scale * eG * np.sum(Qc * Y1, 1) - b * eG * np.sum(Kc * Y2, 1) - eL * np.sum(Kc * Y3, 1)
              + MP.sum(1) - MP.sum(0) + ML.sum(1) - ML.sum(0))
        dG[-1] += np.sum(eL * np.sum(Kc * Y3, 1)) + np.exp(G[-1]) * np.sum(S * dS1)
        dbeta[c * C:(c + 1) * C] += D.sum(1) - eG * np.sum(Kc * Y2, 1)
        dq[c * C:(c + 1) * C] = scale * eG[:, None] * Y1 + dA @ Kc
        dk[c * C:(c + 1) * C] = (-(b * eG)[:, None] * Y2 + eL[:, None] * Y3 + E @ Kc + E.T @ Kc + dA.T @ Qc)
        dg[c * C:(c + 1) * C] = np.cumsum(dG[::-1])[::-1]
    return dq[:T], dk[:T], dv[:T], dg[:T], dbeta[:T], dh0


def check(T, C, K, V, mu, seed):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((T, K)); q /= np.linalg.norm(q, axis=1, keepdims=True)
    k = rng.standard_normal((T, K)); k /= np.linalg.norm(k, axis=1, keepdims=True)
    v = rng.standard_normal((T, V))
    g = -np.log1p(np.exp(-(mu + rng.standard_normal(T))))
    beta = 1 / (1 + np.exp(-rng.standard_normal(T)))
    h0 = 0.1 * rng.standard_normal((K, V))
    do = rng.standard_normal((T, V))
    dht = rng.standard_normal((K, V))
    scale = K ** -0.5
    ts = [torch.tensor(x, requires_grad=True) for x in (q, k, v, g, beta, h0)]
    o, ht = recurrent(*ts, scale)
    (o * torch.tensor(do)).sum().add_((ht * torch.tensor(dht)).sum()).backward()
    ref = [t.grad.numpy() for t in ts]
    got = chunked_bwd(q, k, v, g, beta, h0, do, dht, scale, C)
    names = ["dq", "dk", "dv", "dg", "dbeta", "dh0"]
    order = [0, 1, 2, 3, 4, 5]
    ok = True
    line = []
    for n, i in zip(names, order):
        r, x = ref[i], got[i]
        e = np.linalg.norm(x - r) / max(np.linalg.norm(r), 1e-300)
        ok = ok and e < 1e-9
        line.append(f"{n} {e:.1e}")
    print(f"T{T} C{C} K{K} V{V} mu{mu:+.0f}: " + " ".join(line) + (" PASS" if ok else " FAIL"))
    return ok


if __name__ == "__main__":
    ok = True
    for T, C, mu, seed in [(1, 4, 2, 1), (7, 4, 2, 2), (8, 4, -1, 3), (13, 4, 0, 4), (21, 8, 4, 5), (30, 8, 8, 6)]:
        ok = check(T, C, 6, 5, mu, seed) and ok
    print("ALL PASS" if ok else "SOME FAILED")
    sys.exit(0 if ok else 1)
