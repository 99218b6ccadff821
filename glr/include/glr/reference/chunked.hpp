// glr/reference/chunked.hpp: the chunked algorithm on the CPU, stage by stage as the GPU computes it.
//
// Each stage is one function named as in docs/glr-math.md, taking and returning dense arrays in the
// layouts the CUDA kernels use, so a kernel's output can be diffed against its stage here:
//
//   token arrays        [B, T, heads, dim]     (q, k: H heads; V_new, W, U, dq_hv, ...: HV heads)
//   token scalars       [B, T, HV]             (G, dG, dbeta, ...)
//   in-chunk matrices   [B, T, HV, C]          row i of its chunk's C x C matrix at token i (L, A)
//   per-chunk states    [chunks, HV, K, V]     chunks numbered as in glr/chunks.hpp
//
// Real is the working type (float or double). Storage::bf16 rounds every *stored* intermediate (those
// marked "stored" below, the ones a GPU writes to global memory between stages) to bfloat16, ties to even,
// so the CPU reproduces what a bf16 GPU pipeline keeps; values a kernel holds in registers (the running
// state, G, dG) stay in Real. Which intermediates a kernel stores is its choice: this is the model the
// CUDA version is diffed against, and the place to change if the kernels store differently.
//
// Non-delta members skip the intra-chunk solve entirely (A = I, W = 0, U = V, so V_new = V): their
// L, A, W, U arrays stay empty and wy_backward is not run.
#pragma once

#include <cmath>
#include <cstdint>

#include "glr/chunks.hpp"
#include "glr/params.hpp"
#include "glr/reference/dense.hpp"
#include "glr/reference/inputs.hpp"
#include "glr/tensors.hpp"

namespace glr::reference {

enum class Storage : std::uint8_t { working, bf16 };

struct ChunkedOptions {
  Storage storage = Storage::working;
};

template <class Real>
Real stored(Real x, Storage s) {
  return s == Storage::bf16 ? static_cast<Real>(round_bf16(static_cast<double>(x))) : x;
}

// ---- forward stages ----------------------------------------------------------------------------------

// The smallest log-decay the chunked form uses: exp(floor) is already 0 in Real (float underflows below
// -103.3, double below -744.4), so clamping g there changes no decay, but it keeps a g of -Inf (or -3e38)
// a clean reset, as in the recurrence, instead of a NaN from exp(G_i - G_j) = exp(-Inf + Inf).
template <class Real>
constexpr Real log_decay_floor() {
  return sizeof(Real) >= sizeof(double) ? Real(-1024) : Real(-128);
}

// The in-chunk log-decays of every token (i: position in its chunk, tokens c.begin + i), [B, T, HV] each:
//   G_i  = g_0 + g_1 + ... + g_i    the decay from the state entering the chunk to token i
//   Gr_i =       g_1 + ... + g_i    the same without the chunk's first gate, G_i = g_0 + Gr_i
// A decay between two tokens of the chunk is exp(Gr_i - Gr_j), never exp(G_i - G_j): both are
// exp(g_{j+1} + ... + g_i), but only the first keeps a NaN (or Inf) in g_0, which no such decay involves,
// out of it (kgate plants non-finite values at the first element; docs/glr-math.md section 7).
// Each g is clamped below at log_decay_floor; a per-head gate gives G_i = (i + 1) g, Gr_i = i g.
template <class Real>
struct Decay {
  Dense<Real> G, Gr;
  Real from_start(std::int64_t b, std::int64_t t, std::int64_t hv) const { return std::exp(G(b, t, hv)); }
  Real between(std::int64_t b, std::int64_t ti, std::int64_t tj, std::int64_t hv) const {
    return std::exp(Gr(b, ti, hv) - Gr(b, tj, hv));
  }
};

// The log-decays above. Kept in Real.
template <class Real>
Decay<Real> chunk_local_cumsum(const Params& p, const ChunkPlan& plan, const Inputs<Real>& in);

// L: strictly lower, L_ij = beta_i (k_i . k_j) exp(G_i - G_j) for j < i. Kept in Real.
template <class Real>
Dense<Real> chunk_scaled_kkt(const Params& p, const ChunkPlan& plan, const Inputs<Real>& in, const Decay<Real>& G);

// A = (I + L)^-1 by forward substitution (unit lower triangular). Stored.
template <class Real>
Dense<Real> solve_tril(const Params& p, const ChunkPlan& plan, const Dense<Real>& L, Storage storage);

// W = A diag(beta e^G) K  [B, T, HV, K]  and  U = A diag(beta) V  [B, T, HV, V]. Both stored.
template <class Real>
void recompute_w_u(const Params& p, const ChunkPlan& plan, const Inputs<Real>& in, const Decay<Real>& G,
                   const Dense<Real>& A, Storage storage, Dense<Real>& W, Dense<Real>& U);

// The forward state pass, chunk by chunk along each sequence, from S = h0 (or 0):
//   S_start[c] = S (stored);  V_new = U - W S_start[c] (stored);
//   S <- e^{G_last} S + (K diag(e^{G_last - G}))^T V_new,   ht = S after the sequence's last chunk (Real).
// Non-delta members pass U = v and an empty W.
template <class Real>
void chunk_state_forward(const Params& p, const ChunkPlan& plan, const Inputs<Real>& in, const Decay<Real>& G,
                         const Dense<Real>& U, const Dense<Real>& W, Storage storage, Dense<Real>& S_start,
                         Dense<Real>& V_new, Dense<Real>& ht);

// o = scale [ (Q diag(e^G)) S_start + tril(Gamma . Q K^T) V_new ],  Gamma_ij = exp(G_i - G_j), tril inclusive.
template <class Real>
Dense<Real> chunk_output(const Params& p, const ChunkPlan& plan, const Inputs<Real>& in, const Decay<Real>& G,
                         const Dense<Real>& S_start, const Dense<Real>& V_new);

// ---- backward stages ---------------------------------------------------------------------------------

// dV_local = scale tril(Gamma . Q K^T)^T dO: the part of dV_new that stays inside the chunk. Stored.
template <class Real>
Dense<Real> chunk_local_dv(const Params& p, const ChunkPlan& plan, const Inputs<Real>& in, const Decay<Real>& G,
                           Storage storage);

// The reverse-state stage, chunk by chunk from each sequence's last to its first, from dS = dht (or 0):
//   dS_end[c] = dS (stored: the gradient of the state leaving chunk c);
//   dV_new = dV_local + diag(e^{G_last - G}) K dS_end[c] (stored);
//   dS <- e^{G_last} dS + scale (Q diag(e^G))^T dO - W^T dV_new,   dh0 = dS after the first chunk (Real).
template <class Real>
void chunk_state_backward(const Params& p, const ChunkPlan& plan, const Inputs<Real>& in, const Decay<Real>& G,
                          const Dense<Real>& W, const Dense<Real>& dV_local, Storage storage,
                          Dense<Real>& dS_end, Dense<Real>& dV_new, Dense<Real>& dh0);

// Per value head: dq_hv, dk_hv [B, T, HV, K] (the parts through o and through the state update),
// dW = -dV_new S_start^T (stored; delta members only) and dG [B, T, HV] (the parts of d/dG_i through o and
// the state update, before the reverse cumulative sum; Real).
template <class Real>
void chunk_dqkwg(const Params& p, const ChunkPlan& plan, const Inputs<Real>& in, const Decay<Real>& G,
                 const Dense<Real>& S_start, const Dense<Real>& V_new, const Dense<Real>& dS_end,
                 const Dense<Real>& dV_new, Storage storage, Dense<Real>& dq_hv, Dense<Real>& dk_hv,
                 Dense<Real>& dW, Dense<Real>& dG);

// The WY backward through W = A diag(beta e^G) K, U = A diag(beta) V and A = (I + L)^-1 (delta members):
// dk_wy [B, T, HV, K], dv [B, T, HV, V], dbeta [B, T, HV], dG_wy [B, T, HV].
template <class Real>
void wy_backward(const Params& p, const ChunkPlan& plan, const Inputs<Real>& in, const Decay<Real>& G,
                 const Dense<Real>& A, const Dense<Real>& dW, const Dense<Real>& dV_new, Dense<Real>& dk_wy,
                 Dense<Real>& dv, Dense<Real>& dbeta, Dense<Real>& dG_wy);

// dg_t = sum over the chunk's tokens i >= t of (dG_i + dG_wy_i)  (dG_wy may be empty)  [B, T, HV].
template <class Real>
Dense<Real> chunk_reverse_cumsum(const Params& p, const ChunkPlan& plan, const Dense<Real>& dG,
                                 const Dense<Real>& dG_wy);

// The gradients of the shared inputs: dq, dk [B, T, H, K] summed over each group's value heads in order
// hv = h*group .. h*group + group-1 (dk_wy may be empty), and for a per-head gate dg [HV] summed over every
// token in plan order. Other gates return dg unchanged.
template <class Real>
void reduce_gradients(const Params& p, const ChunkPlan& plan, const Dense<Real>& dq_hv, const Dense<Real>& dk_hv,
                      const Dense<Real>& dk_wy, const Dense<Real>& dg_token, Dense<Real>& dq, Dense<Real>& dk,
                      Dense<Real>& dg);

// ---- whole passes --------------------------------------------------------------------------------------

template <class Real>
struct ForwardStages {
  ChunkPlan plan;
  Decay<Real> G;
  Dense<Real> L, A, W, U;  // L, A, W, U empty for non-delta members
  Dense<Real> S_start, V_new;
  Dense<Real> o, ht;
};

template <class Real>
struct BackwardStages {
  ForwardStages<Real> forward;  // recomputed, as the GPU backward does
  Dense<Real> dV_local, dS_end, dV_new, dh0;
  Dense<Real> dq_hv, dk_hv, dW, dG;
  Dense<Real> dk_wy, dv, dbeta, dG_wy;  // dk_wy, dbeta, dG_wy empty for non-delta members
  Dense<Real> dg_token;                 // [B, T, HV] after the reverse cumulative sum
  Dense<Real> dq, dk, dg;               // reduced
};

// p must be valid. Inputs as gathered by gather_forward / gather_backward.
template <class Real>
ForwardStages<Real> chunked_forward_stages(const Params& p, const Inputs<Real>& in, const ChunkedOptions& opt);
template <class Real>
BackwardStages<Real> chunked_backward_stages(const Params& p, const Inputs<Real>& in, const ChunkedOptions& opt);

// The whole call on strided tensors: validate, gather, run the stages, write the outputs.
template <class Real>
void chunked_forward(const Params& p, const ForwardTensors<Real>& t, const ChunkedOptions& opt = {});
template <class Real>
void chunked_backward(const Params& p, const BackwardTensors<Real>& t, const ChunkedOptions& opt = {});

}  // namespace glr::reference
