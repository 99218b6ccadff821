// glr/cuda/sm90/gdn_fwd_mma.cuh: the gated-linear-recurrence forward on the tensor cores (issue 16).
//
// bf16 q, k, v, o; g (log-decay) and beta in fp32 or bf16; h0, ht fp32; chunk C = 64; fp32 accumulation
// (mma.sync m16n8k16 bf16 -> fp32, i.e. HMMA; no wgmma/TMA yet). Dense layouts (flash-linear-attention's):
// q, k (B, T, H, K); v, o (B, T, HV, V); g, beta (B, T, HV) (a per-head g: (HV)); h0, ht (N, HV, K, V).
// Rung 3 (the default, what glr's API dispatches to: glr/cuda/sm90/forward.cu) takes K = V = 64 or 128, every
// member of the family (the delta rule on or off: template flag kDelta; the gate none, per token or per head),
// grouped value heads (HV a multiple of H; value head hv reads q/k head hv / (HV / H)) and packed sequences
// (cu_seqlens, B = 1: chunks never cross a sequence boundary, the state restarts from h0 at each; the offsets
// are checked on the device). Rungs 1 and 2 take Gated DeltaNet at K = V = 128, HV = H, dense batches.
//
// Two kernels, as in the chunked algorithm of DESIGN.md section 5 (G = in-chunk cumulative log-decay), in
// three rungs of one ladder (GdnFwdVariant; the check runs all three, rung 3 is the default):
//
//   wy (one block per chunk and head, 4 warps):
//     G = cumsum(g), each g clamped below at -128 (clamp_log_decay);  K K^T on the tensor cores;
//     L = strictly_lower(diag(beta) (K K^T . Gamma)),  Gamma_ij = exp(G_i - G_j);
//     T = (I + L)^-1 by 16 x 16 blocks (invert_unit_lower): each warp inverts its diagonal block in fp32
//     registers, the off-diagonal blocks are mma products in two bf16 pieces a factor (about 2^-16 relative);
//     rungs 1, 2: W = T (beta e^G . K),  U = T (beta . V)  (bf16 operands, fp32 accumulation, stored bf16)
//     rung 1 only: P = scale tril(Gamma . Q K^T)          (diagonal included, stored bf16)
//     rung 3: T stored (bf16), nothing else; without the delta rule only G (no K K^T, no T)
//   state (one block per head and 64 state columns, 4 warps; chunks in order; rung 3: 64, 32 or 16 columns,
//   the backward's rule, see gdn_fwd_slice_width; rung 3 with few, long sequences: the split-sequence pass,
//   segments of a sequence in parallel, see state_t_kernel and gdn_fwd_split_segments):
//     rungs 1, 2: V_new = U - W h;   rung 3: V_new = T (beta . V - beta e^G . (K h)), without delta V_new = V
//     O = scale e^G . (Q h) + P V_new   (rungs 2, 3: P computed here, kept in registers as A fragments)
//     h = e^{G_last} h + K^T (e^{G_last - G} . V_new)
//     h stays in fp32 registers (each warp K/4 rows x 64 columns); a bf16 copy in shared memory feeds the
//     K h (W h) and Q h products. Next chunk's tiles arrive by cp.async while this one computes.
//
// Every reduction is a fixed sequence of mma/FMA: bitwise deterministic run to run.
// Padding rows of a short last chunk load as zero with g = 0, beta = 0: they contribute nothing, and G stays
// constant over them, so G[C-1] is the chunk's last real cumulative decay.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "env_switch.hpp"  // the GLR_* switches (bwd_chunk_wgmma, state_wgmma_requested, ...)
#include "mma_sync.cuh"
#include "segments.cuh"
#include "state_slice.cuh"

namespace glr::cuda::sm90 {

namespace gdn {
inline constexpr int C = 64;         // chunk
inline constexpr int DK = 128;       // K
inline constexpr int DV = 128;       // V
inline constexpr int VT = 64;        // state columns per block of rungs 1 and 2's state kernel (rung 3: Slice<kVT>)
inline constexpr int LD128 = DK + 8; // bf16 row stride of (rows x 128) shared tiles: 272 B, ldmatrix conflict-free
inline constexpr int LD64 = C + 8;   // bf16 row stride of (rows x 64) shared tiles: 144 B
inline constexpr int kThreads = 128;
inline constexpr float kLog2e = 1.4426950408889634f;  // e^x = 2^(x log2 e): the wy and state kernels' decays
// e^x as one ex2.approx.ftz of x log2 e (mma_sync.cuh ex2_approx: -Inf gives 0, NaN stays NaN, below 2^-126 0),
// where expf spent a range reduction: the decays of the forward state pass and of the backward's h, dh and chunk
// kernels. (A difference of two exponents scaled once a row and column is ex2_approx itself: the P and Gamma tiles.)
__device__ __forceinline__ float exp_approx(float x) { return ex2_approx(x * kLog2e); }
static_assert(DV % VT == 0, "state columns split evenly");
static_assert(VT == C, "the state kernel's column-pair loops serve both the VT state columns and the C keys of Q K^T");
}  // namespace gdn

struct GdnFwdArgs {
  const __nv_bfloat16* q = nullptr;  // (B, T, H, K)
  const __nv_bfloat16* k = nullptr;  // (B, T, H, K)
  const __nv_bfloat16* v = nullptr;  // (B, T, HV, V)
  const void* g = nullptr;           // gate 1: (B, T, HV); gate 2: (HV); gate 0: null. fp32, or bf16 with g_bf16
  const void* beta = nullptr;        // (B, T, HV), fp32 or bf16 (beta_bf16); null without the delta rule
  const float* h0 = nullptr;         // (N, HV, K, V) or null
  __nv_bfloat16* o = nullptr;        // (B, T, HV, V)
  float* ht = nullptr;               // (N, HV, K, V) or null
  int B = 0, T = 0, H = 0;
  int D = 128;  // K = V = D, 64 or 128 (rungs 1 and 2: 128 only)
  int HV = 0;  // value heads, a multiple of H (grouped value heads: value head hv reads q/k head hv / (HV / H))
  float scale = 0.f;
  // The family member (glr/params.hpp): the delta rule (beta, the triangular solve) on or off; the gate.
  bool delta = true;
  int gate = 1;  // 0 none (g = 0), 1 per token and value head, 2 one constant per value head (RetNet)
  bool g_bf16 = false, beta_bf16 = false;
  // Packed sequences (B = 1): N + 1 offsets on the device, int64 or int32 (one of them), N >= 1. The chunk
  // table kernel checks them on the device: if they are not 0 = cu[0] <= ... <= cu[N] = T, the status word
  // becomes 1 and every output is NaN.
  const std::int64_t* cu_seqlens = nullptr;
  const std::int32_t* cu_seqlens32 = nullptr;
  int N = 0;
  // workspace, carved by gdn_fwd_workspace_carve. Chunk slots: chunk c of sequence n and value head hv is slot
  // first_chunk(n) HV + hv nch(n) + c (dense: (b HV + hv) NT + c).
  std::int32_t* status = nullptr;  // the workspace's first word: 0, or 1 for invalid packed offsets
  std::int32_t* table = nullptr;   // packed only: [bad, total, first_chunk[N + 1], chunk_seq[slots]]
  __nv_bfloat16* W = nullptr;  // (slots, C, K) (rungs 1, 2)
  __nv_bfloat16* U = nullptr;  // (slots, C, V) (rungs 1, 2)
  __nv_bfloat16* P = nullptr;  // (slots, C, C): P (rung 1) or T = (I + L)^-1 (rung 3)
  float* G = nullptr;          // (slots, C)
  float* Bc = nullptr;         // (slots, C) beta, padded with 0 (rung 3)
  float* Gr = nullptr;         // (slots, C) or null: G without the chunk's first gate (rung 3 out, for the backward)
  // The split-sequence state pass (rung 3 only; gdn_fwd_split_plan picks segs and seg_len; segs = 1: not split):
  // segments cut by length, segments.cuh: a sequence of nch chunks in max(1, min(segs, floor(nch / seg_len)))
  // balanced segments. Per Es/Ms slot q (segment j < nseg - 1 of a sequence with nseg > 1, segments.cuh's
  // numbering) and value head hv a (K, V) fp32 state at (q HV + hv) K V of Es and Ms:
  // Es: the segment's end state from 0 (j = 0: from h0), then (the combine pass) the state entering segment j + 1;
  // Ms: the segment's transition (K x K, j >= 1). Set by gdn_fwd_workspace_carve when split (seg::split).
  // segtab: packed sequences only, the segment table (segment_table_kernel), carved with Es and Ms.
  int segs = 1;
  int seg_len = 1;
  float* Es = nullptr;
  float* Ms = nullptr;
  std::int32_t* segtab = nullptr;

  __host__ __device__ bool varlen() const { return N > 0; }
  __host__ __device__ int num_seqs() const { return varlen() ? N : B; }
  // Chunks per sequence-and-head slot space: dense B NT; packed an upper bound (each sequence adds at most one
  // partial chunk).
  __host__ __device__ long long chunk_slots() const {
    const long long nt = (static_cast<long long>(T) + 63) / 64;
    return varlen() ? nt + N : nt * B;
  }
};

// The rungs: 1 = P through the workspace (wy computes Q K^T), 2 = Q K^T in the state kernel, P in registers,
// 3 = as 2, and the wy kernel leaves only T: V_new = T (beta V - beta e^G K h) in the state kernel.
// Rungs 1 and 2 take Gated DeltaNet on dense batches with HV = H only; rung 3 takes every member, grouped value
// heads and packed sequences.
enum class GdnFwdVariant { p_in_workspace = 1, p_in_registers = 2, t_only = 3 };

// Workspace: a 256-byte header (the status word), the chunk table (packed sequences), then per chunk slot
// P or T (C, C) bf16, G and beta (C) fp32, and for rungs 1 and 2 W and U (C, 128) bf16; with the split state
// pass (seg::split(a), rung 3: set a.segs and a.seg_len before asking) Es and Ms, 2 seg::slots HV K V fp32 (B1
// T32768 H16 K=V=128 in 8 segments: 14.7 MB; the packed 32k shape at seg_len 64: at most 8 slots, 16.8 MB), and
// for packed sequences the segment table (3 (N + 1) int32). At B8 T4096 H16: 71 MB for rung 3, 340 MB for rungs 1 and 2 (the block
// programs' fp32 workspace: 1.48 GB).
// Each piece starts 256-byte aligned; the whole needs a 256-byte aligned base.
namespace gdn_ws {
inline std::size_t up256(std::size_t x) { return (x + 255) / 256 * 256; }
struct Plan {
  std::size_t table = 0, P = 0, G = 0, Bc = 0, W = 0, U = 0, Es = 0, Ms = 0, segtab = 0, bytes = 0;
};
inline Plan plan(const GdnFwdArgs& a, GdnFwdVariant variant) {
  const std::size_t slots = static_cast<std::size_t>(a.chunk_slots()) * static_cast<std::size_t>(a.HV > 0 ? a.HV : a.H);
  const std::size_t rows = slots * 64;
  Plan p;
  std::size_t o = 256;
  p.table = o;
  if (a.varlen()) o += up256(4 * (2 + static_cast<std::size_t>(a.N) + 1 + static_cast<std::size_t>(a.chunk_slots())));
  p.P = o;
  o += up256(rows * 64 * 2);
  p.G = o;
  o += up256(rows * 4);
  p.Bc = o;
  o += up256(rows * 4);
  if (variant != GdnFwdVariant::t_only) {
    p.W = o;
    o += up256(rows * 128 * 2);
    p.U = o;
    o += up256(rows * 128 * 2);
  }
  if (seg::split(a)) {  // the split state pass: seg::slots x HV states of K x V fp32, twice; the segment table
    const std::size_t states = static_cast<std::size_t>(seg::slots(a)) *
                               static_cast<std::size_t>(a.HV > 0 ? a.HV : a.H) * static_cast<std::size_t>(a.D) *
                               static_cast<std::size_t>(a.D) * 4;
    p.Es = o;
    o += up256(states);
    p.Ms = o;
    o += up256(states);
    p.segtab = o;
    o += up256(4 * static_cast<std::size_t>(seg::table_words(a)));
  }
  p.bytes = o;
  return p;
}
}  // namespace gdn_ws

// a's sizes (B, T, H, HV, N) must be set.
inline std::size_t gdn_fwd_workspace_bytes(const GdnFwdArgs& a, GdnFwdVariant variant) {
  return gdn_ws::plan(a, variant).bytes;
}
// Fills the workspace pointers of a (W, U null for rung 3; table null for dense batches) from one 256-byte
// aligned block of gdn_fwd_workspace_bytes(a, variant). A block carved for rung 1 or 2 serves rung 3 too.
inline void gdn_fwd_workspace_carve(GdnFwdArgs& a, void* ws, GdnFwdVariant variant) {
  const gdn_ws::Plan p = gdn_ws::plan(a, variant);
  char* base = static_cast<char*>(ws);
  a.status = reinterpret_cast<std::int32_t*>(base);
  a.table = a.varlen() ? reinterpret_cast<std::int32_t*>(base + p.table) : nullptr;
  a.P = reinterpret_cast<__nv_bfloat16*>(base + p.P);
  a.G = reinterpret_cast<float*>(base + p.G);
  a.Bc = reinterpret_cast<float*>(base + p.Bc);
  a.W = variant == GdnFwdVariant::t_only ? nullptr : reinterpret_cast<__nv_bfloat16*>(base + p.W);
  a.U = variant == GdnFwdVariant::t_only ? nullptr : reinterpret_cast<__nv_bfloat16*>(base + p.U);
  a.Es = seg::split(a) ? reinterpret_cast<float*>(base + p.Es) : nullptr;
  a.Ms = seg::split(a) ? reinterpret_cast<float*>(base + p.Ms) : nullptr;
  a.segtab = seg::table_words(a) > 0 ? reinterpret_cast<std::int32_t*>(base + p.segtab) : nullptr;
}

// The wy kernel's outputs that glr's forward can save for its backward (glr::cuda::Saved, glr_cuda.hpp), apart from
// the workspace: what cannot be formed again cheaply. Per chunk slot T (C, C) bf16 (delta rule only) and G (C) fp32,
// and for packed sequences the chunk table: the backward workspace's Tm, G and table pieces (gdn_bwd_workspace_layout),
// the same sizes, each 256-byte aligned from a 256-byte aligned base. The wy kernel fills them when a's P, G and table
// point here (gdn_wy_saved_carve). Beta and Gr (the wy kernel's other outputs) stay out: a backward given the block
// forms them from beta and g (inputs it holds anyway) with wy_scalars_kernel, word for word the wy kernel's, 8 bytes
// a token written instead of 8 saved. Rung 3 forms T from Gr whether or not it saves, so a saving forward's o is the
// non-saving one's word for word. At B8 T4096 H16 K = V = 128 with the delta rule 69.2 MB = 66 MiB (T 67.1 MB, G 2.1);
// without it 2.1 MB (G).
namespace gdn_ws {
struct SavedPlan {
  static constexpr std::size_t kAbsent = ~std::size_t{0};
  std::size_t P = kAbsent, G = kAbsent, table = kAbsent, bytes = 0;
};
inline SavedPlan saved_plan(const GdnFwdArgs& a) {
  const std::size_t rows = static_cast<std::size_t>(a.chunk_slots()) * static_cast<std::size_t>(a.HV > 0 ? a.HV : a.H) * 64;
  SavedPlan p;
  std::size_t o = 0;
  auto piece = [&o](std::size_t bytes) {
    const std::size_t at = o;
    o += up256(bytes);
    return at;
  };
  if (a.delta) p.P = piece(rows * 64 * 2);
  p.G = piece(rows * 4);
  if (a.varlen()) p.table = piece(4 * (2 + static_cast<std::size_t>(a.N) + 1 + static_cast<std::size_t>(a.chunk_slots())));
  p.bytes = o;
  return p;
}
}  // namespace gdn_ws
// a's sizes (B, T, H, HV, N) and delta set.
inline std::size_t gdn_wy_saved_bytes(const GdnFwdArgs& a) { return gdn_ws::saved_plan(a).bytes; }
// Points a's saved wy outputs (P = T with the delta rule, G; table for packed sequences) into `saved`, a 256-byte
// aligned block of gdn_wy_saved_bytes(a); Bc and Gr stay where they were (the forward's workspace Bc, Gr null: the
// forward reads no Gr).
inline void gdn_wy_saved_carve(GdnFwdArgs& a, void* saved) {
  const gdn_ws::SavedPlan p = gdn_ws::saved_plan(a);
  char* base = static_cast<char*>(saved);
  if (a.delta) a.P = reinterpret_cast<__nv_bfloat16*>(base + p.P);
  a.G = reinterpret_cast<float*>(base + p.G);
  if (a.varlen()) a.table = reinterpret_cast<std::int32_t*>(base + p.table);
}

namespace gdn {

struct WySmem {
  __nv_bfloat16 k[C * LD128];    // (C, K) k; then (rungs 1, 2) beta e^G k
  float G[C];                    // G log2 e (rung 3 with the delta rule: Gr log2 e)
  float beta[C];
  __nv_bfloat16 T[C * LD64];     // (C, C) the solve's hi words (invert_unit_lower), at its end bf16((I + L)^-1)
  __nv_bfloat16 Tlo[C * LD64];   // (C, C) the solve's lo words    (not in rung 3's allocation: it uses k's place)
  __nv_bfloat16 q[C * LD128];    // (C, K) q (rung 1); then the W/U staging tile   (not in rung 3's allocation)
  __nv_bfloat16 v[C * LD128];    // (C, V) v; then beta v                          (not in rung 3's allocation)
};
// Rung 3 needs neither q, v nor the staging tile, and k only until K K^T is done, so the solve's lo words take k's
// place: 27 KB (71 KB for rungs 1 and 2), 8 blocks per multiprocessor (35 KB gave 6).
inline constexpr std::size_t wy_smem_bytes(int mode) { return mode == 3 ? offsetof(WySmem, Tlo) : sizeof(WySmem); }
static_assert(C * LD64 <= C * LD128, "rung 3's lo words fit in k's place");

// kQK: Q K^T computed by the state kernel itself and kept in registers (P never leaves the chip; k double
// buffered so the next chunk's whole tile set arrives during this chunk's second half). Otherwise P comes
// from the workspace, written by the wy kernel.
template <bool kQK>
struct StateSmem {
  __nv_bfloat16 W[C * LD128];                  // (C, K)
  __nv_bfloat16 q[C * LD128];                  // (C, K)
  __nv_bfloat16 k[kQK ? 2 : 1][C * LD128];     // (C, K) per buffer
  __nv_bfloat16 P[kQK ? 8 : C * LD64];         // (C, C), unused with kQK
  __nv_bfloat16 h[DK * LD64];   // (K, VT) bf16 copy of the state slice
  __nv_bfloat16 vn[C * LD64];   // (C, VT) V_new
  __nv_bfloat16 vnd[C * LD64];  // (C, VT) e^{G_last - G} V_new
  float G[C];
};

// Copy a (C x kD) bf16 tile whose row r starts at src + r * stride (rows >= valid are zero-filled) into a
// shared tile of row stride kD + 8 (ldmatrix conflict-free). C kD / 8 pieces of 16 bytes. (kD 16 and 32: the h pass's
// narrow v slices, gdn_bwd_mma.cuh h_kernel's prefetching schedule.)
template <int kD>
__device__ __forceinline__ void load_tile(__nv_bfloat16* dst, const __nv_bfloat16* src, std::int64_t stride, int valid,
                                          int tid) {
  static_assert(kD == 16 || kD == 32 || kD == 64 || kD == 128, "rows of 2, 4, 8 or 16 pieces");
  constexpr int kPieces = kD / 8, kShift = kD == 128 ? 4 : kD == 64 ? 3 : kD == 32 ? 2 : 1, kLd = kD + 8;
#pragma unroll
  for (int it = 0; it < C * kPieces / kThreads; ++it) {
    const int e = tid + it * kThreads, r = e >> kShift, cc = e & (kPieces - 1);  // shifts: e is a signed int
    const bool in = r < valid;
    cp_async_16(smem_addr(dst + r * kLd + cc * 8), in ? src + r * stride + cc * 8 : src, in);
  }
}
__device__ __forceinline__ void load_tile128(__nv_bfloat16* dst, const __nv_bfloat16* src, std::int64_t stride,
                                             int valid, int tid) {
  load_tile<DK>(dst, src, stride, valid, tid);
}

// ---- Sequences and chunks (dense batches and packed sequences alike) ----
// Token t of sequence n sits at flat token index begin + t (dense: begin = n T); its q/k row is
// (flat H + hv / (HV / H)) K, its v/o row (flat HV + hv) V.
struct Seq {
  std::int64_t begin;  // flat token index of its first token
  int len;             // tokens
  int first;           // its first chunk in the chunk numbering (dense: n NT)
  int nch;             // chunks
};
// The chunk table of packed sequences (a.table, int32): [0] 1 if the offsets are invalid, [1] total chunks,
// [kFirst + n] first chunk of sequence n (n = 0..N), [kFirst + N + 1 + j] the sequence of chunk j (or -1).
inline constexpr int kFirst = 2;

__device__ __forceinline__ std::int64_t seq_offset(const GdnFwdArgs& a, int i) {
  return a.cu_seqlens ? a.cu_seqlens[i] : static_cast<std::int64_t>(a.cu_seqlens32[i]);
}
__device__ __forceinline__ Seq sequence(const GdnFwdArgs& a, int n) {
  if (!a.varlen()) {
    const int nt = (a.T + C - 1) / C;
    return {static_cast<std::int64_t>(n) * a.T, a.T, n * nt, nt};
  }
  const std::int64_t b = seq_offset(a, n), e = seq_offset(a, n + 1);
  const int first = a.table[kFirst + n];
  return {b, static_cast<int>(e - b), first, a.table[kFirst + n + 1] - first};
}
// The chunk slot of (sequence, value head, chunk): the row of the per-chunk workspace.
__device__ __forceinline__ std::int64_t slot(const GdnFwdArgs& a, const Seq& sq, int hv, int c) {
  return static_cast<std::int64_t>(sq.first) * a.HV + static_cast<std::int64_t>(hv) * sq.nch + c;
}
// Block (bx, by) of the wy grid: dense (chunk, b HV + hv); packed (chunk of the whole batch, hv). False for a
// grid slot past the last chunk (packed: the grid has chunk_slots() columns, an upper bound).
__device__ __forceinline__ bool wy_chunk(const GdnFwdArgs& a, int bx, int by, Seq& sq, int& hv, int& c) {
  int n;
  if (!a.varlen()) {
    n = by / a.HV;
    hv = by % a.HV;
    c = bx;
  } else {
    n = a.table[kFirst + a.N + 1 + bx];
    if (n < 0) return false;
    hv = by;
  }
  sq = sequence(a, n);
  if (a.varlen()) c = bx - sq.first;
  return true;
}
__device__ __forceinline__ float load_scalar(const void* p, bool bf16, std::int64_t i) {
  return bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]) : static_cast<const float*>(p)[i];
}

// Each g is clamped below at -128, the CPU reference's float log_decay_floor (glr/reference, and the block
// programs' stages/cumsum.hpp), where exp is already 0 in fp32 (e^-128 < 2^-149): no decay changes, but
// g = -Inf (a legal decay, the state reset) no longer makes G = -Inf and the chunk-relative decays
// exp(G_i - G_j) = exp(-Inf + Inf) = NaN; even Gamma_ii was NaN. After a clamped g, G_i - G_j of two later
// tokens is a difference of values near -128 k: an absolute error of about ulp(128 k) <= k 2^-16, far under the
// bf16 operands' 2^-9. `g < floor ? floor : g` keeps a NaN g NaN (fmaxf would drop it).
__device__ __forceinline__ float clamp_log_decay(float g) { return g < -128.f ? -128.f : g; }

// Packed sequences: check the offsets and build the chunk table (one block of kThreads). Thread t takes the
// sequences [t per, (t + 1) per); chunk counts are prefix-summed by thread 0 in a fixed order.
// Dynamic shared memory: table_smem_bytes.
inline constexpr std::size_t table_smem_bytes = (kThreads + 1) * sizeof(int);
// The kernels that are not templates are static: sm90/forward.cu and sm90/backward.cu both include this header.
static __global__ void __launch_bounds__(kThreads) chunk_table_kernel(const __grid_constant__ GdnFwdArgs a) {
  extern __shared__ __align__(16) char smem_raw[];
  int* count = reinterpret_cast<int*>(smem_raw);  // (kThreads)
  int& bad = count[kThreads];
  const int tid = threadIdx.x, N = a.N;
  const int per = (N + kThreads - 1) / kThreads, lo = min(N, tid * per), hi = min(N, lo + per);
  const int slots = static_cast<int>(a.chunk_slots());
  if (tid == 0) bad = seq_offset(a, 0) != 0 || seq_offset(a, N) != a.T;
  __syncthreads();
  int mine = 0;
  for (int n = lo; n < hi; ++n) {
    const std::int64_t b = seq_offset(a, n), e = seq_offset(a, n + 1);
    if (b < 0 || e < b || e > a.T)
      bad = 1;
    else
      mine += static_cast<int>((e - b + C - 1) / C);
  }
  count[tid] = mine;
  __syncthreads();
  if (tid == 0) {
    int run = 0;
    for (int t = 0; t < kThreads; ++t) {
      const int x = count[t];
      count[t] = run;
      run += x;
    }
    if (run > slots) bad = 1;  // cannot happen for valid offsets
    a.table[0] = bad;
    a.table[1] = bad ? 0 : run;
    *a.status = bad;
    if (!bad) a.table[kFirst + N] = run;
  }
  __syncthreads();
  std::int32_t* chunk_seq = a.table + kFirst + N + 1;
  if (bad) {
    for (int j = tid; j < slots; j += kThreads) chunk_seq[j] = -1;
    return;
  }
  int at = count[tid];
  for (int n = lo; n < hi; ++n) {
    a.table[kFirst + n] = at;
    const int nch = static_cast<int>((seq_offset(a, n + 1) - seq_offset(a, n) + C - 1) / C);
    for (int j = 0; j < nch; ++j) chunk_seq[at + j] = n;
    at += nch;
  }
  __syncthreads();
  for (int j = a.table[1] + tid; j < slots; j += kThreads) chunk_seq[j] = -1;
}

// Packed sequences, split state passes (seg::split): the segment table (segments.cuh) from the chunk table, one
// block of kThreads after chunk_table_kernel: segments, Es slots and combine rows of each sequence, prefix-summed
// in a fixed order as the chunk table's (thread t takes sequences [t per, (t + 1) per), threads 0, 1, 2 one prefix
// each).
// Invalid offsets (table[0] != 0): nothing (every pass returns on that verdict before it reads the table).
// Dynamic shared memory: segment_table_smem_bytes. A: GdnFwdArgs or GdnBwdArgs (the backward's h and dh passes).
static_assert(seg::kTableFirst == kFirst, "segments.cuh reads the chunk table");
inline constexpr std::size_t segment_table_smem_bytes = 3 * kThreads * sizeof(int);
template <class A>
__global__ void __launch_bounds__(kThreads) segment_table_kernel(const __grid_constant__ A a) {
  extern __shared__ __align__(16) char smem_raw[];
  int* count = reinterpret_cast<int*>(smem_raw);  // (3, kThreads): segments, slots, combine rows
  if (a.table[0] != 0) return;
  const int tid = threadIdx.x, N = a.N;
  const int per = (N + kThreads - 1) / kThreads, lo = min(N, tid * per), hi = min(N, lo + per);
  int mine[3] = {0, 0, 0};
  for (int n = lo; n < hi; ++n) {
    const int nseg = seg::count(a.segs, a.seg_len, a.table[kFirst + n + 1] - a.table[kFirst + n]);
    mine[0] += nseg;
    mine[1] += nseg - 1;
    mine[2] += nseg >= 3 ? 1 : 0;
  }
  for (int k = 0; k < 3; ++k) count[k * kThreads + tid] = mine[k];
  __syncthreads();
  if (tid < 3) {
    int run = 0;
    for (int t = 0; t < kThreads; ++t) {
      const int x = count[tid * kThreads + t];
      count[tid * kThreads + t] = run;
      run += x;
    }
    a.segtab[tid * (N + 1) + N] = run;
  }
  __syncthreads();
  int at[3] = {count[tid], count[kThreads + tid], count[2 * kThreads + tid]};
  for (int n = lo; n < hi; ++n) {
    const int nseg = seg::count(a.segs, a.seg_len, a.table[kFirst + n + 1] - a.table[kFirst + n]);
    a.segtab[n] = at[0];
    a.segtab[(N + 1) + n] = at[1];
    a.segtab[2 * (N + 1) + n] = at[2];
    at[0] += nseg;
    at[1] += nseg - 1;
    at[2] += nseg >= 3 ? 1 : 0;
  }
}

// Packed sequences with invalid offsets: every output NaN (launched after the state kernel).
static __global__ void poison_kernel(const __grid_constant__ GdnFwdArgs a) {
  if (a.table[0] == 0) return;
  const std::int64_t n = static_cast<std::int64_t>(a.T) * a.HV * a.D;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    reinterpret_cast<std::uint16_t*>(a.o)[i] = 0xffffu;
}

// ---- T = (I + L)^-1, the wy kernel's triangular solve ----
// L strictly lower triangular, 64 x 64, fp32 values; 16 x 16 blocks L_bc, D_b = I + L_bb, warp b owns row block b.
// With the 32 x 32 halves A = [[D_0, 0], [L_10, D_1]], B = [[D_2, 0], [L_32, D_3]] and L21 = [[L_2,01], [L_3,01]]:
//   T = [[A^-1, 0], [-(B^-1 L21) A^-1, B^-1]],   A^-1 = [[D_0^-1, 0], [T_10, D_1^-1]],   T_10 = -W_1 D_0^-1,
//   B^-1 L21 = [[W_2], [W_3]],  T_32 = -U D_2^-1,  T_b,01 = -W_b A^-1  (b = 2, 3), where
//   W_1 = D_1^-1 L_10,  W_2 = D_2^-1 L_2,01,  U = D_3^-1 L_32,  W_3 = D_3^-1 L_3,01 - U W_2.
// Three phases, a block barrier between them (the old solve had three, and two warps idle in its longest phase):
//   a) every warp: D_b^-1 by back substitution in fp32 registers (lane j, j = lane % 16, row j: x D_b = e_j, 120 FMA
//      a lane), to the tiles; then from its own rows only: warp 1 W_1, warp 2 W_2 (to the tiles, over L_2,01),
//      warp 3 U and D_3^-1 L_3,01.
//   b) warp 1: T_10 (to the tiles, over L_10); warp 3: T_32, W_3. Warps 0 and 2 run others(0..63) (rungs 1, 2).
//   c) warps 2, 3: T_b,01.
// The products run on the tensor cores, each fp32 operand x in two bf16 pieces, hi = bf16(x) and lo = bf16(x - hi)
// (x to about 2^-17 |x|), a b as lo_a hi_b + hi_a lo_b + hi_a hi_b (mma3): about 2^-16 of |a| |b|, where fp32 FMA
// gave 2^-24 and T is then rounded to bf16 (2^-8 relative) anyway. Every sum a fixed sequence of mma/FMA.
// The tiles: H = s.T (hi words) and Lo (lo words: s.Tlo; rung 3: over s.k), (C x C) bf16, row stride LD64. The
// caller writes L with put_l (below the diagonal blocks as hi and lo words; each diagonal block transposed in fp32
// over its own hi and lo words, the scratch of phase a); the solve leaves bf16(T) in H's lower block triangle (D_b^-1
// with its zeros above the diagonal); H right of row block b's diagonal block is undefined. Each warp must have
// written its own row block of L (put_l) before it calls; all threads call.
__device__ __forceinline__ void split_bf16x2(float x0, float x1, std::uint32_t& hi, std::uint32_t& lo) {
  hi = pack_bf16x2(x0, x1);
  lo = bf16x2_residual(x0, x1, hi);  // 0 beside a non-finite hi: an Inf stays one piece (the backward's rule)
}
// The pair (i, j), (i, j + 1) as hi words to H and (kLo) lo words to Lo.
template <bool kLo = true>
__device__ __forceinline__ void put_pair(__nv_bfloat16* H, __nv_bfloat16* Lo, int i, int j, float x0, float x1) {
  std::uint32_t h, l;
  split_bf16x2(x0, x1, h, l);
  *reinterpret_cast<std::uint32_t*>(H + i * LD64 + j) = h;
  if constexpr (kLo) *reinterpret_cast<std::uint32_t*>(Lo + i * LD64 + j) = l;
}
// Row `row`, columns 4 q .. 4 q + 3 of diagonal block b's fp32 scratch (L_bb transposed): columns 0..7 over the hi
// words of the block's row, 8..15 over its lo words (32 bytes each).
__device__ __forceinline__ float* diag_scratch(__nv_bfloat16* H, __nv_bfloat16* Lo, int b, int row, int q) {
  __nv_bfloat16* base = (q < 2 ? H : Lo) + (16 * b + row) * LD64 + 16 * b;
  return reinterpret_cast<float*>(base) + 4 * (q & 1);
}
// L's pair (i, j), (i, j + 1), j even, in i's diagonal block: to the block's scratch, transposed.
__device__ __forceinline__ void put_diag(__nv_bfloat16* H, __nv_bfloat16* Lo, int i, int j, float x0, float x1) {
  const int b = i >> 4, il = i & 15, jl = j & 15;
  diag_scratch(H, Lo, b, jl, il >> 2)[il & 3] = x0;
  diag_scratch(H, Lo, b, jl + 1, il >> 2)[il & 3] = x1;
}
// L's pair (i, j), (i, j + 1), j even, where the solve reads it (nothing right of the diagonal blocks).
__device__ __forceinline__ void put_l(__nv_bfloat16* H, __nv_bfloat16* Lo, int i, int j, float x0, float x1) {
  if (j >> 4 < i >> 4)
    put_pair(H, Lo, i, j, x0, x1);
  else if (j >> 4 == i >> 4)
    put_diag(H, Lo, i, j, x0, x1);
}
// Accumulators c (mma C layout) of the n-tile at column n0, rows r0 + g8 (+8), through put_pair.
template <bool kLo = true>
__device__ __forceinline__ void put_tile(__nv_bfloat16* H, __nv_bfloat16* Lo, const float (&c)[4], int r0, int n0,
                                         int lane) {
  const int i = r0 + (lane >> 2), j = n0 + 2 * (lane & 3);
  put_pair<kLo>(H, Lo, i, j, c[0], c[1]);
  put_pair<kLo>(H, Lo, i + 8, j, c[2], c[3]);
}
// The A operand of k-tile (n-tiles c0, c1 of accumulators) as hi and lo fragments, negated.
__device__ __forceinline__ void neg_a_split(const float (&c0)[4], const float (&c1)[4], std::uint32_t (&hi)[4],
                                            std::uint32_t (&lo)[4]) {
  split_bf16x2(-c0[0], -c0[1], hi[0], lo[0]);
  split_bf16x2(-c0[2], -c0[3], hi[1], lo[1]);
  split_bf16x2(-c1[0], -c1[1], hi[2], lo[2]);
  split_bf16x2(-c1[2], -c1[3], hi[3], lo[3]);
}
// d0, d1 (n-tiles n0, n0 + 8) += A B, A in hi and lo fragments, B = rows k0..k0+15, columns n0..n0+15 of the (C x C)
// tiles (row-major, K x N): the small terms first.
__device__ __forceinline__ void mma3(float (&d0)[4], float (&d1)[4], const std::uint32_t (&ah)[4],
                                     const std::uint32_t (&al)[4], const __nv_bfloat16* H, const __nv_bfloat16* Lo,
                                     int k0, int n0, int lane) {
  std::uint32_t bh[4], bl[4];
  ldsm_b_kn(bh, H, LD64, k0, n0, lane);
  ldsm_b_kn(bl, Lo, LD64, k0, n0, lane);
  mma_bf16_16816(d0, al, bh[0], bh[1]);
  mma_bf16_16816(d1, al, bh[2], bh[3]);
  mma_bf16_16816(d0, ah, bl[0], bl[1]);
  mma_bf16_16816(d1, ah, bl[2], bl[3]);
  mma_bf16_16816(d0, ah, bh[0], bh[1]);
  mma_bf16_16816(d1, ah, bh[2], bh[3]);
}
template <class Others>
__device__ __forceinline__ void invert_unit_lower(__nv_bfloat16* H, __nv_bfloat16* Lo, int warp, int lane,
                                                  Others others) {
  const int b = warp, r0 = 16 * b, j = lane & 15;
  // a) D_b^-1, row j: x_i = [i == j] - sum_{m > i} L_mi x_m from i = 15 down (x_i = 0 for i > j); the scratch's row i
  // is L's column i. The newest term, m = i + 1, enters last.
  __syncwarp();
  float x[16];
#pragma unroll
  for (int i = 15; i >= 0; --i) {
    float acc0 = 0.f, acc1 = 0.f;
#pragma unroll
    for (int q = 3; q >= 0; --q) {
      if (4 * q + 3 > i) {
        const float4 l4 = *reinterpret_cast<const float4*>(diag_scratch(H, Lo, b, i, q));
        const int m = 4 * q;
        acc0 = fmaf(l4.w, x[m + 3], acc0);
        if (m + 2 > i) acc1 = fmaf(l4.z, x[m + 2], acc1);
        if (m + 1 > i) acc0 = fmaf(l4.y, x[m + 1], acc0);
        if (m > i) acc1 = fmaf(l4.x, x[m], acc1);
      }
    }
    x[i] = i == j ? 1.f : (i > j ? 0.f : -(acc0 + acc1));
  }
  __syncwarp();  // every lane is done with the scratch: D_b^-1 takes its place
  if (lane < 16) {
    std::uint32_t h[8], l[8];
#pragma unroll
    for (int p = 0; p < 8; ++p) split_bf16x2(x[2 * p], x[2 * p + 1], h[p], l[p]);
    uint4* dh = reinterpret_cast<uint4*>(H + (r0 + j) * LD64 + r0);
    uint4* dl = reinterpret_cast<uint4*>(Lo + (r0 + j) * LD64 + r0);
    dh[0] = make_uint4(h[0], h[1], h[2], h[3]);
    dh[1] = make_uint4(h[4], h[5], h[6], h[7]);
    dl[0] = make_uint4(l[0], l[1], l[2], l[3]);
    dl[1] = make_uint4(l[4], l[5], l[6], l[7]);
  }
  __syncwarp();
  // The warp's products from its own rows: D_b^-1 (A, from the tiles) times row block b of L (B) at columns n0.
  float w[4][4], u[2][4];  // warp 2: W_2; warp 3: D_3^-1 L_3,01, then W_3 | warp 1: W_1; warp 3: U
#pragma unroll
  for (int n = 0; n < 4; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) w[n][e] = u[n & 1][e] = 0.f;
  if (b > 0) {
    std::uint32_t dh[4], dl[4];
    ldsm_a(dh, H, LD64, r0, r0, lane);
    ldsm_a(dl, Lo, LD64, r0, r0, lane);
    if (b == 1 || b == 3) mma3(u[0], u[1], dh, dl, H, Lo, r0, r0 - 16, lane);  // W_1 = D_1^-1 L_10, U = D_3^-1 L_32
    if (b >= 2) {
      mma3(w[0], w[1], dh, dl, H, Lo, r0, 0, lane);  // D_b^-1 L_b,01
      mma3(w[2], w[3], dh, dl, H, Lo, r0, 16, lane);
    }
    if (b == 2) {
      __syncwarp();  // every lane's ldmatrix of L_2,01 is done: W_2 takes its place
#pragma unroll
      for (int n = 0; n < 4; ++n) put_tile(H, Lo, w[n], r0, 8 * n, lane);
    }
  }
  __syncthreads();
  // b) T_10 = -W_1 D_0^-1 (warp 1, hi and lo: A^-1 for warps 2, 3); T_32 = -U D_2^-1 (hi only),
  //    W_3 = D_3^-1 L_3,01 - U W_2.
  if (b == 1 || b == 3) {
    std::uint32_t ah[4], al[4];
    neg_a_split(u[0], u[1], ah, al);
    float t[2][4] = {};
    mma3(t[0], t[1], ah, al, H, Lo, r0 - 16, r0 - 16, lane);
    if (b == 3) {
      mma3(w[0], w[1], ah, al, H, Lo, 32, 0, lane);
      mma3(w[2], w[3], ah, al, H, Lo, 32, 16, lane);
    }
    if (b == 1) {
      put_tile(H, Lo, t[0], r0, r0 - 16, lane);
      put_tile(H, Lo, t[1], r0, r0 - 8, lane);
    } else {
      put_tile<false>(H, Lo, t[0], r0, r0 - 16, lane);
      put_tile<false>(H, Lo, t[1], r0, r0 - 8, lane);
    }
  } else {
    others(b == 0 ? lane : 32 + lane);
  }
  __syncthreads();
  // c) T_b,01 = -W_b A^-1 (warps 2, 3); A^-1's zero block (rows 0..15, columns 16..31) is skipped.
  if (b >= 2) {
    std::uint32_t a0h[4], a0l[4], a1h[4], a1l[4];
    neg_a_split(w[0], w[1], a0h, a0l);
    neg_a_split(w[2], w[3], a1h, a1l);
    float t[4][4] = {};
    mma3(t[0], t[1], a0h, a0l, H, Lo, 0, 0, lane);
    mma3(t[0], t[1], a1h, a1l, H, Lo, 16, 0, lane);
    mma3(t[2], t[3], a1h, a1l, H, Lo, 16, 16, lane);
#pragma unroll
    for (int n = 0; n < 4; ++n) put_tile<false>(H, Lo, t[n], r0, 8 * n, lane);
  }
  __syncwarp();
}

// The wy kernel's per-token scalars of one chunk (its warp 0; wy_scalars_kernel's warps): lane l's tokens 2 l and
// 2 l + 1 of the chunk starting at flat token tf0 (len tokens; 0 past them), value head hv: the gates g as the scans
// take them (clamp_log_decay; 0 without a gate) and beta widened to fp32 (0 without the delta rule), in gg and bb.
// One implementation for both kernels, so the beta and Gr they write are the same words.
template <bool kDelta>
__device__ __forceinline__ void wy_scalars_in(const GdnFwdArgs& a, std::int64_t tf0, int len, int hv, int lane,
                                              float (&gg)[2], float (&bb)[2]) {
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const int i = 2 * lane + u;
    const bool in = i < len;
    const std::int64_t tk = (tf0 + i) * a.HV + hv;
    gg[u] = !in || a.gate == 0 ? 0.f : clamp_log_decay(load_scalar(a.g, a.g_bf16, a.gate == 2 ? hv : tk));
    bb[u] = in && kDelta ? load_scalar(a.beta, a.beta_bf16, tk) : 0.f;
  }
}
// Gr_i = g_1 + ... + g_i over the chunk (lane l: elements 2 l, 2 l + 1): G's scan without the chunk's first gate.
// Every lane of the warp must call it (warp_scan_pairs).
__device__ __forceinline__ float2 wy_scan_gr(const float (&gg)[2], int lane) {
  return warp_scan_pairs(lane == 0 ? 0.f : gg[0], gg[1], lane);
}

// Kernel 1: per (chunk, head). kMode 1: W, U and P = scale tril(Gamma . Q K^T) to the workspace; 2: W, U;
// 3: only T = (I + L)^-1 (and beta), the state kernel forms V_new = T (beta V - beta e^G K h) itself.
// The minimum blocks per multiprocessor match what shared memory allows (71 KB: 3; rung 3's 27 KB: 8); without
// them ptxas capped rungs 1 and 2 at 128 registers and spilled.
template <int kMode, bool kDelta = true, int kD = DK>
__global__ void __launch_bounds__(kThreads, kMode == 3 ? 8 : 3) wy_kernel(const __grid_constant__ GdnFwdArgs a) {
  static_assert(kDelta || kMode == 3, "members without the delta rule run on rung 3 only");
  static_assert(kD == DK || kMode == 3, "head dim 64 runs on rung 3 only");
  constexpr int kLd = kD + 8;  // row stride of the k tile
  constexpr bool kP = kMode == 1;
  extern __shared__ __align__(16) char smem_raw[];
  WySmem& s = *reinterpret_cast<WySmem*>(smem_raw);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g8 = lane >> 2, t4 = lane & 3;
  Seq sq;
  int hv, c;
  if (!wy_chunk(a, blockIdx.x, blockIdx.y, sq, hv, c)) return;  // the same for the whole block
  const int hq = hv / (a.HV / a.H);
  const int t0 = c * C, len = min(C, sq.len - t0);
  const std::int64_t sl = slot(a, sq, hv, c);
  const std::int64_t tf0 = sq.begin + t0;  // flat index of the chunk's first token
  const std::int64_t qrow = static_cast<std::int64_t>(a.H) * kD, vrow = static_cast<std::int64_t>(a.HV) * DV;

  if constexpr (kDelta) {
    if constexpr (kP) load_tile128(s.q, a.q + (tf0 * a.H + hq) * DK, qrow, len, tid);
    load_tile<kD>(s.k, a.k + (tf0 * a.H + hq) * kD, qrow, len, tid);
    if constexpr (kMode != 3) load_tile128(s.v, a.v + (tf0 * a.HV + hv) * DV, vrow, len, tid);
    cp_async_commit();
  }

  // G = cumsum(g) over the chunk: warp 0, two tokens per lane, an inclusive shuffle scan (fixed order).
  if (warp == 0) {
    float gg[2], bb[2];
    wy_scalars_in<kDelta>(a, tf0, len, hv, lane, gg, bb);
    const float2 Gp = warp_scan_pairs(gg[0], gg[1], lane);
    const float G0 = Gp.x, G1 = Gp.y;
    // s.G holds the decays in base 2 (times log2 e): the kernel's exponentials are exp2f (MUFU.EX2 and a denormal
    // fix-up) instead of expf's range reduction, 8 instructions an element of L. The product's rounding adds about
    // ulp(|G| log2 e) to a difference's absolute error, the order of G's own rounding (clamp_log_decay's comment).
    s.G[2 * lane] = G0 * kLog2e;
    s.G[2 * lane + 1] = G1 * kLog2e;
    s.beta[2 * lane] = bb[0];
    s.beta[2 * lane + 1] = bb[1];
    *reinterpret_cast<float2*>(a.G + sl * C + 2 * lane) = make_float2(G0, G1);
    if constexpr (kMode == 3) {
      if (kDelta || a.Gr) {
        // Gr_i = g_1 + ... + g_i (the same scan without the chunk's first gate), in s.G for L below (rung 3 reads
        // s.G only there): Gamma_ij = exp(Gr_i - Gr_j) = 2^(s.G_i - s.G_j), so a NaN or +Inf g_0 (which only decays
        // the state entering the chunk) leaves T finite, where exp(G_i - G_j) is NaN - NaN (docs/glr-math.md
        // section 7). Every rung-3 wy run forms T so, whether or not a.Gr takes Gr out (the backward, a saving
        // forward): one T, so a forward gives the same o bits with and without save. a.G keeps G (the state
        // kernel's decays).
        const float2 Rp = wy_scan_gr(gg, lane);
        const float R0 = Rp.x, R1 = Rp.y;
        if constexpr (kDelta) {
          s.G[2 * lane] = R0 * kLog2e;
          s.G[2 * lane + 1] = R1 * kLog2e;
        }
        if (a.Gr) *reinterpret_cast<float2*>(a.Gr + sl * C + 2 * lane) = make_float2(R0, R1);
      }
    }
    if constexpr (kMode == 3 && kDelta)
      *reinterpret_cast<float2*>(a.Bc + sl * C + 2 * lane) = make_float2(bb[0], bb[1]);
  }
  if constexpr (!kDelta) return;  // no delta rule: V_new = V, only G is needed
  cp_async_wait<0>();
  __syncthreads();

  // Step 1: KK^T and QK^T, warp w rows 16w..16w+15, only the column tiles j < 16w + 16 (causal).
  const int r0 = warp * 16;
  __nv_bfloat16* const Tlo = kMode == 3 ? s.k : s.Tlo;  // the solve's lo words (rung 3: over k once K K^T is done)
  {
    float kk[8][4], qk[8][4];
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) kk[n][e] = qk[n][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
      std::uint32_t ak[4], aq[4];
      ldsm_a(ak, s.k, kLd, r0, ks * 16, lane);
      if constexpr (kP) ldsm_a(aq, s.q, LD128, r0, ks * 16, lane);
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        if (np > warp) break;  // a branch past the warp's causal tiles, not predicated-off mma that still issue
        std::uint32_t bk[4];
        ldsm_b_nk(bk, s.k, kLd, np * 16, ks * 16, lane);
        mma_bf16_16816(kk[2 * np], ak, bk[0], bk[1]);
        mma_bf16_16816(kk[2 * np + 1], ak, bk[2], bk[3]);
        if constexpr (kP) {
          mma_bf16_16816(qk[2 * np], aq, bk[0], bk[1]);
          mma_bf16_16816(qk[2 * np + 1], aq, bk[2], bk[3]);
        }
      }
    }
    if constexpr (kMode == 3) __syncthreads();  // every warp is done with k: the solve's lo words take its place
    // L = strictly_lower(diag(beta) (K K^T . Gamma)) to the solve's tiles (put_l's two cases), this warp's rows and
    // only its column tiles n < 2 (w + 1); rung 1 also P (every column tile: zeros right of the diagonal). Gamma_ij =
    // 2^(s.G_i - s.G_j). Tiles left of the diagonal block (j < 16 w <= i) need no mask; in the others, a masked
    // argument (-Inf right of the diagonal: 0) and lv, pv by select, never by a zero factor (a NaN k stays out).
    __nv_bfloat16* Pg = a.P + sl * C * C;
    float Gi[2], bi[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      Gi[half] = s.G[r0 + g8 + half * 8];
      bi[half] = s.beta[r0 + g8 + half * 8];
    }
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      if (!kP && n >= 2 * (warp + 1)) break;
      const float2 Gj = *reinterpret_cast<const float2*>(s.G + n * 8 + 2 * t4);
      const bool below = n < 2 * warp;  // the same for the warp
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int i = r0 + g8 + half * 8;
        float lv[2], pv[2];
        if (below) {
#pragma unroll
          for (int u = 0; u < 2; ++u) {
            const float gam = exp2f(Gi[half] - (u == 0 ? Gj.x : Gj.y));
            lv[u] = bi[half] * gam * kk[n][half * 2 + u];
            pv[u] = a.scale * gam * qk[n][half * 2 + u];
          }
          put_pair(s.T, Tlo, i, n * 8 + 2 * t4, lv[0], lv[1]);
        } else {
#pragma unroll
          for (int u = 0; u < 2; ++u) {
            const int j = n * 8 + 2 * t4 + u;
            // never of a positive difference
            const float gam = exp2f(j <= i ? Gi[half] - (u == 0 ? Gj.x : Gj.y) : -INFINITY);
            lv[u] = j < i ? bi[half] * gam * kk[n][half * 2 + u] : 0.f;
            pv[u] = j <= i ? a.scale * gam * qk[n][half * 2 + u] : 0.f;
          }
          if (n < 2 * (warp + 1)) put_diag(s.T, Tlo, i, n * 8 + 2 * t4, lv[0], lv[1]);
        }
        if constexpr (kP) *reinterpret_cast<std::uint32_t*>(Pg + i * C + n * 8 + 2 * t4) = pack_bf16x2(pv[0], pv[1]);
      }
    }
  }

  // Step 2: T = (I + L)^-1 (invert_unit_lower; each warp starts from its own rows of L, no barrier first); in its
  // phase b warps 0 and 2 scale k by beta e^G and v by beta in place (rungs 1, 2).
  invert_unit_lower(s.T, Tlo, warp, lane, [&](int t) {
    if constexpr (kMode != 3) {
      for (int e = t; e < C * (DK / 2); e += 64) {
        const int r = e / (DK / 2), cp = e % (DK / 2);
        const float bG = s.beta[r] * exp2f(s.G[r]), bt = s.beta[r];
        auto* kp = reinterpret_cast<std::uint32_t*>(s.k + r * LD128) + cp;
        auto* vp = reinterpret_cast<std::uint32_t*>(s.v + r * LD128) + cp;
        const float2 kf = unpack_bf16x2(*kp), vf = unpack_bf16x2(*vp);
        *kp = pack_bf16x2(bG * kf.x, bG * kf.y);
        *vp = pack_bf16x2(bt * vf.x, bt * vf.y);
      }
    }
  });
  if constexpr (kMode == 3) {
    // This warp's 16 rows of T to the workspace in 16-byte pieces (zeros right of its diagonal block).
    __nv_bfloat16* Tg = a.P + sl * C * C;
#pragma unroll
    for (int it = 0; it < 4; ++it) {
      const int p = lane + 32 * it, r = r0 + (p >> 3), cc = p & 7;
      const uint4 z = make_uint4(0u, 0u, 0u, 0u);
      *reinterpret_cast<uint4*>(Tg + r * C + cc * 8) =
          cc < 2 * (warp + 1) ? *reinterpret_cast<const uint4*>(s.T + r * LD64 + cc * 8) : z;
    }
    return;
  }
  __syncthreads();

  // Step 3: W = T (beta e^G k), U = T (beta v); warp w rows 16w.., T is lower triangular (k tiles <= w).
  // Each result is staged in this warp's rows of the free q area, then written out in 16-byte pieces.
  __nv_bfloat16* stage = s.q;
  for (int which = 0; which < 2; ++which) {
    const __nv_bfloat16* src = which == 0 ? s.k : s.v;
    float acc[16][4];
#pragma unroll
    for (int n = 0; n < 16; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[n][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      if (ks <= warp) {
        std::uint32_t at[4];
        ldsm_a(at, s.T, LD64, r0, ks * 16, lane);
#pragma unroll
        for (int np = 0; np < 8; ++np) {
          std::uint32_t bv[4];
          ldsm_b_kn(bv, src, LD128, ks * 16, np * 16, lane);
          mma_bf16_16816(acc[2 * np], at, bv[0], bv[1]);
          mma_bf16_16816(acc[2 * np + 1], at, bv[2], bv[3]);
        }
      }
    }
#pragma unroll
    for (int n = 0; n < 16; ++n) {
      *reinterpret_cast<std::uint32_t*>(stage + (r0 + g8) * LD128 + n * 8 + 2 * t4) = pack_bf16x2(acc[n][0], acc[n][1]);
      *reinterpret_cast<std::uint32_t*>(stage + (r0 + g8 + 8) * LD128 + n * 8 + 2 * t4) =
          pack_bf16x2(acc[n][2], acc[n][3]);
    }
    __syncwarp();
    __nv_bfloat16* dst = (which == 0 ? a.W : a.U) + (sl * C + r0) * DK;
#pragma unroll
    for (int it = 0; it < 8; ++it) {
      const int e = lane + it * 32, r = e >> 4, cc = e & 15;
      *reinterpret_cast<uint4*>(dst + r * DK + cc * 8) =
          *reinterpret_cast<const uint4*>(stage + (r0 + r) * LD128 + cc * 8);
    }
    __syncwarp();
  }
}

// The backward's wy scalars beside a saved block (gdn_bwd_use_saved: T and G, the wy kernel's costly outputs, come
// from the forward): Gr and, with the delta rule, beta of every chunk slot into a.Gr and a.Bc (the backward's
// workspace), word for word as the wy kernel writes them (wy_scalars_in, wy_scan_gr: the same loads and the same
// fp32 additions in the same order). G is not written (the saved block's is read, never written: it serves any
// number of backward calls). One warp a chunk: grid (ceil(NT / kWarps), by) over the wy grid's columns NT (dense:
// the chunks of a sequence; packed: chunk_slots()) and its rows by (wy_chunk); 8 bytes written and g, beta read a
// token (2 to 8 bytes), no shared memory.
template <bool kDelta>
__global__ void __launch_bounds__(kThreads) wy_scalars_kernel(const __grid_constant__ GdnFwdArgs a) {
  constexpr int kWarps = kThreads / 32;
  const int lane = threadIdx.x & 31;
  const long long nt = a.varlen() ? a.chunk_slots() : (a.T + C - 1) / C;
  const long long bx = static_cast<long long>(blockIdx.x) * kWarps + (threadIdx.x >> 5);  // the wy grid's column
  Seq sq;
  int hv, c;
  if (bx >= nt || !wy_chunk(a, static_cast<int>(bx), blockIdx.y, sq, hv, c)) return;  // the same for the warp
  const int t0 = c * C, len = min(C, sq.len - t0);
  const std::int64_t sl = slot(a, sq, hv, c);
  float gg[2], bb[2];
  wy_scalars_in<kDelta>(a, sq.begin + t0, len, hv, lane, gg, bb);
  const float2 R = wy_scan_gr(gg, lane);
  *reinterpret_cast<float2*>(a.Gr + sl * C + 2 * lane) = R;
  if constexpr (kDelta) *reinterpret_cast<float2*>(a.Bc + sl * C + 2 * lane) = make_float2(bb[0], bb[1]);
}

// Kernel 2: per (head, 64 state columns), the chunks in order.
template <bool kQK>
__global__ void __launch_bounds__(kThreads) state_kernel(const __grid_constant__ GdnFwdArgs a) {
  extern __shared__ __align__(16) char smem_raw[];
  StateSmem<kQK>& s = *reinterpret_cast<StateSmem<kQK>*>(smem_raw);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g8 = lane >> 2, t4 = lane & 3;
  const int v0 = blockIdx.x * VT, bh = blockIdx.y, b = bh / a.H, h = bh % a.H;
  const int NT = (a.T + C - 1) / C, Tp = NT * C;
  const std::int64_t row_stride = static_cast<std::int64_t>(a.H) * DK;
  const std::int64_t tokb = static_cast<std::int64_t>(b) * a.T * a.H + h;  // token (b, 0, h)
  const __nv_bfloat16* Wg = a.W + static_cast<std::int64_t>(bh) * Tp * DK;
  const __nv_bfloat16* Ug = a.U + static_cast<std::int64_t>(bh) * Tp * DV + v0;
  const __nv_bfloat16* Pg = a.P + static_cast<std::int64_t>(bh) * NT * C * C;
  const float* Gg = a.G + static_cast<std::int64_t>(bh) * Tp;
  const std::int64_t hoff = static_cast<std::int64_t>(bh) * DK * DV + v0;
  const int r0 = warp * 16;   // this warp's rows of the (C x VT) tiles
  const int d0 = warp * 32;   // this warp's rows of the state slice (K x VT)
  if (a.status && blockIdx.x == 0 && blockIdx.y == 0 && tid == 0) *a.status = 0;  // dense batches: always valid

  // Group X: the tiles the first half of a chunk reads (W, q, G; with kQK also k, into buffer c % 2).
  // Group Y (without kQK): the second half's (k, P).
  auto load_x = [&](int c) {
    const int t0 = c * C, len = min(C, a.T - t0);
    load_tile128(s.W, Wg + static_cast<std::int64_t>(t0) * DK, DK, C, tid);
    load_tile128(s.q, a.q + (tokb + static_cast<std::int64_t>(t0) * a.H) * DK, row_stride, len, tid);
    if constexpr (kQK)
      load_tile128(s.k[c & 1], a.k + (tokb + static_cast<std::int64_t>(t0) * a.H) * DK, row_stride, len, tid);
    if (tid < C / 4) cp_async_16(smem_addr(s.G + tid * 4), Gg + t0 + tid * 4, true);
  };
  auto load_y = [&](int c) {
    const int t0 = c * C, len = min(C, a.T - t0);
    load_tile128(s.k[0], a.k + (tokb + static_cast<std::int64_t>(t0) * a.H) * DK, row_stride, len, tid);
    const __nv_bfloat16* Pc = Pg + static_cast<std::int64_t>(c) * C * C;
#pragma unroll
    for (int it = 0; it < C * 8 / kThreads; ++it) {
      const int e = tid + it * kThreads, r = e >> 3, cc = e & 7;
      cp_async_16(smem_addr(s.P + r * LD64 + cc * 8), Pc + r * C + cc * 8, true);
    }
  };

  // The state slice: warp rows d0 + 16 mt + g8 (+8), columns 8 n + 2 t4 (+1).
  float hs[2][8][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int d = d0 + mt * 16 + g8 + half * 8, col = n * 8 + 2 * t4;
        float2 x = make_float2(0.f, 0.f);
        if (a.h0) x = *reinterpret_cast<const float2*>(a.h0 + hoff + static_cast<std::int64_t>(d) * DV + col);
        hs[mt][n][half * 2] = x.x;
        hs[mt][n][half * 2 + 1] = x.y;
      }
  auto write_h_bf16 = [&]() {
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int d = d0 + mt * 16 + g8 + half * 8, col = n * 8 + 2 * t4;
          *reinterpret_cast<std::uint32_t*>(s.h + d * LD64 + col) =
              pack_bf16x2(hs[mt][n][half * 2], hs[mt][n][half * 2 + 1]);
        }
  };
  write_h_bf16();
  if (NT > 0) {
    load_x(0);
    cp_async_commit();
    if constexpr (!kQK) {
      load_y(0);
      cp_async_commit();
      cp_async_wait<1>();  // X(0)
    } else {
      cp_async_wait<0>();
    }
  }
  __syncthreads();

  for (int c = 0; c < NT; ++c) {
    const int t0 = c * C, len = min(C, a.T - t0);
    const __nv_bfloat16* kc = s.k[kQK ? (c & 1) : 0];
    // U rows of this warp, straight into accumulator layout (issued first, used after the W h loop).
    std::uint32_t u[8][2];
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int half = 0; half < 2; ++half)
        u[n][half] = *reinterpret_cast<const std::uint32_t*>(
            Ug + static_cast<std::int64_t>(t0 + r0 + g8 + half * 8) * DV + n * 8 + 2 * t4);

    // Phase A: W h and Q h (C x VT, inner K), warp rows r0..r0+15.
    float av[8][4], ao[8][4], sq[8][4];  // sq: Q K^T rows r0.. (kQK only)
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) av[n][e] = ao[n][e] = sq[n][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < DK / 16; ++ks) {
      std::uint32_t aw[4], aq[4];
      ldsm_a(aw, s.W, LD128, r0, ks * 16, lane);
      ldsm_a(aq, s.q, LD128, r0, ks * 16, lane);
#pragma unroll
      for (int np = 0; np < VT / 16; ++np) {
        std::uint32_t bh4[4];
        ldsm_b_kn(bh4, s.h, LD64, ks * 16, np * 16, lane);
        mma_bf16_16816(av[2 * np], aw, bh4[0], bh4[1]);
        mma_bf16_16816(av[2 * np + 1], aw, bh4[2], bh4[3]);
        mma_bf16_16816(ao[2 * np], aq, bh4[0], bh4[1]);
        mma_bf16_16816(ao[2 * np + 1], aq, bh4[2], bh4[3]);
        if constexpr (kQK) {
          if (np <= warp) {  // causal: column tiles j < r0 + 16
            std::uint32_t bk[4];
            ldsm_b_nk(bk, kc, LD128, np * 16, ks * 16, lane);
            mma_bf16_16816(sq[2 * np], aq, bk[0], bk[1]);
            mma_bf16_16816(sq[2 * np + 1], aq, bk[2], bk[3]);
          }
        }
      }
    }
    // With kQK: P = scale tril(Gamma . Q K^T), rounded to bf16 straight into A-operand fragments (the
    // accumulator layout of n-tiles 2kk, 2kk+1 is the A layout of k-tile kk).
    std::uint32_t pa[4][4];
    if constexpr (kQK) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int i = r0 + g8 + half * 8;
        const float Gi = s.G[i];
#pragma unroll
        for (int n = 0; n < 8; ++n) {
          float pv[2];
#pragma unroll
          for (int u2 = 0; u2 < 2; ++u2) {
            const int j = n * 8 + 2 * t4 + u2;
            pv[u2] = j <= i ? a.scale * expf(Gi - s.G[j]) * sq[n][half * 2 + u2] : 0.f;
          }
          pa[n >> 1][(n & 1) * 2 + half] = pack_bf16x2(pv[0], pv[1]);
        }
      }
    }
    const float GL = s.G[C - 1];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int i = r0 + g8 + half * 8;
      const float Gi = s.G[i], eo = a.scale * expf(Gi), ed = expf(GL - Gi);
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        const float2 uf = unpack_bf16x2(u[n][half]);
        const float x0 = uf.x - av[n][half * 2], x1 = uf.y - av[n][half * 2 + 1];
        ao[n][half * 2] *= eo;
        ao[n][half * 2 + 1] *= eo;
        *reinterpret_cast<std::uint32_t*>(s.vn + i * LD64 + n * 8 + 2 * t4) = pack_bf16x2(x0, x1);
        *reinterpret_cast<std::uint32_t*>(s.vnd + i * LD64 + n * 8 + 2 * t4) = pack_bf16x2(ed * x0, ed * x1);
      }
    }
    cp_async_wait<0>();  // Y(c): k, P (nothing outstanding with kQK)
    __syncthreads();     // vn, vnd, k, P visible; every warp is done with W, q, G, h
    if (c + 1 < NT) load_x(c + 1);
    cp_async_commit();

    // Phase C: O += P V_new (P lower triangular: k tiles <= warp), then the state update.
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      if (ks <= warp) {
        std::uint32_t ap[4];
        if constexpr (kQK) {
#pragma unroll
          for (int e = 0; e < 4; ++e) ap[e] = pa[ks][e];
        } else {
          ldsm_a(ap, s.P, LD64, r0, ks * 16, lane);
        }
#pragma unroll
        for (int np = 0; np < VT / 16; ++np) {
          std::uint32_t bv[4];
          ldsm_b_kn(bv, s.vn, LD64, ks * 16, np * 16, lane);
          mma_bf16_16816(ao[2 * np], ap, bv[0], bv[1]);
          mma_bf16_16816(ao[2 * np + 1], ap, bv[2], bv[3]);
        }
      }
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int i = r0 + g8 + half * 8;
      if (i < len) {
        __nv_bfloat16* orow = a.o + (tokb + static_cast<std::int64_t>(t0 + i) * a.H) * DV + v0;
#pragma unroll
        for (int n = 0; n < 8; ++n)
          *reinterpret_cast<std::uint32_t*>(orow + n * 8 + 2 * t4) = pack_bf16x2(ao[n][half * 2], ao[n][half * 2 + 1]);
      }
    }
    const float decay = expf(GL);
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) hs[mt][n][e] *= decay;
#pragma unroll
    for (int ks = 0; ks < C / 16; ++ks) {
      std::uint32_t ak[2][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) ldsm_a_trans(ak[mt], kc, LD128, d0 + mt * 16, ks * 16, lane);
#pragma unroll
      for (int np = 0; np < VT / 16; ++np) {
        std::uint32_t bv[4];
        ldsm_b_kn(bv, s.vnd, LD64, ks * 16, np * 16, lane);
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          mma_bf16_16816(hs[mt][2 * np], ak[mt], bv[0], bv[1]);
          mma_bf16_16816(hs[mt][2 * np + 1], ak[mt], bv[2], bv[3]);
        }
      }
    }
    write_h_bf16();      // h was last read in phase A, before the barrier above
    cp_async_wait<0>();  // X(c + 1)
    __syncthreads();     // h, W, q, G (k) visible; every warp is done with k, P, vn, vnd
    if constexpr (!kQK) {
      if (c + 1 < NT) load_y(c + 1);
      cp_async_commit();
    }
  }

  if (a.ht) {
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int d = d0 + mt * 16 + g8 + half * 8, col = n * 8 + 2 * t4;
          *reinterpret_cast<float2*>(a.ht + hoff + static_cast<std::int64_t>(d) * DV + col) =
              make_float2(hs[mt][n][half * 2], hs[mt][n][half * 2 + 1]);
        }
  }
}


// Where a block of rung 3's state pass works (state_t_kernel and state_t_wgmma_kernel: one grid, one walk), and
// its set-up, which both kernels take from here: the rows of its tokens, its workspace slots, the state it starts
// from and leaves (below: load_g_beta, load_v_rows, store_o_rows, the loads and stores both kernels issue alike).
struct StateTBlock {
  int seg, nseg, v0, hv, hq; // segment of the sequence's nseg (segments.cuh), first value column, value head, q/k head
  bool trans;                // pass A's M block (from h = I, no value input)
  std::int64_t hoff;         // the slice's offset in an (N, HV, K, V) state array (h0, ht)
  std::int64_t soff;         // the slice's offset in Es / Ms at the sequence's Es slot 0 (split only)
  Seq sq;                    // the sequence
  int c_begin, c_end;        // this segment's chunks
  std::int64_t slot0;        // the workspace slot of the sequence's chunk 0 for this value head
  const __nv_bfloat16* Tw;   // its T (C x C), G and beta (C) in the workspace, chunk c at + c C C, + c C
  const float *Gg, *Bg;

  // Element offsets of the sequence's token t: its q/k row (head hq) and its v/o row (value head hv, column v0).
  template <int kD>
  __device__ __forceinline__ std::int64_t qk_at(const GdnFwdArgs& a, int t) const {
    return ((sq.begin + t) * a.H + hq) * kD;
  }
  template <int kD>
  __device__ __forceinline__ std::int64_t vo_at(const GdnFwdArgs& a, int t) const {
    return ((sq.begin + t) * a.HV + hv) * kD + v0;
  }
  // The slice's (K x kVT, row stride kD) state entering, at this block's slice (null: 0): h0 (or 0) for segment 0,
  // 0 for pass A's later segments (I for M: h_start), Es slot seg - 1 in pass C.
  template <int kD, bool kStateOnly>
  __device__ __forceinline__ const float* h_in(const GdnFwdArgs& a) const {
    if (seg == 0) return a.h0 ? a.h0 + hoff : nullptr;
    return kStateOnly ? nullptr : a.Es + soff + static_cast<std::int64_t>(seg - 1) * a.HV * kD * kD;
  }
  // Its elements (d, col..col+1) of the slice (col from v0), from h_in (null: 0), or I's for an M block.
  template <int kD>
  __device__ __forceinline__ float2 h_start(const float* h_in, int d, int col) const {
    if (trans) return make_float2(d == v0 + col ? 1.f : 0.f, d == v0 + col + 1 ? 1.f : 0.f);
    if (h_in) return *reinterpret_cast<const float2*>(h_in + static_cast<std::int64_t>(d) * kD + col);
    return make_float2(0.f, 0.f);
  }
  // The slice leaving (as h_in's): ht from the last segment (pass C); pass A's Es or Ms slot of this segment; else null.
  template <int kD, bool kStateOnly>
  __device__ __forceinline__ float* h_out(const GdnFwdArgs& a) const {
    if (kStateOnly) return (trans ? a.Ms : a.Es) + soff + static_cast<std::int64_t>(seg) * a.HV * kD * kD;
    return seg == nseg - 1 && a.ht ? a.ht + hoff : nullptr;
  }
};
// Fills b (the comment above state_t_kernel says how the grid is laid out); clears the status word (one thread).
// kSlotRows: pass A's grid (rows are Es slots x HV), else pass C's (segment rows x HV; also the backward's h pass).
// False if the block has nothing to do: a row past the real count (the grids take seg::rows / seg::slots, upper
// bounds), M_0 (never used), or invalid packed offsets (then row n < N writes sequence n's ht slice NaN here; o:
// poison_kernel).
template <int kD, int kVT, bool kStateOnly, bool kSlotRows = kStateOnly>
__device__ __forceinline__ bool state_t_block(const GdnFwdArgs& a, int tid, StateTBlock& b) {
  const int row = static_cast<int>(blockIdx.y) / a.HV;
  b.hv = static_cast<int>(blockIdx.y) % a.HV;
  b.trans = kStateOnly && static_cast<int>(blockIdx.x) >= kD / kVT;  // this block computes M_seg
  b.v0 = static_cast<int>(kStateOnly ? blockIdx.x % (kD / kVT) : blockIdx.x) * kVT;
  b.hq = b.hv / (a.HV / a.H);
  if (a.status && !a.varlen() && blockIdx.x == 0 && blockIdx.y == 0 && tid == 0) *a.status = 0;
  if (a.varlen() && a.table[0] != 0) {  // invalid packed offsets: this block's ht slice NaN (o: poison_kernel)
    if (!kSlotRows && row < a.N && a.ht) {
      const std::int64_t hoff = (static_cast<std::int64_t>(row) * a.HV + b.hv) * kD * kD + b.v0;
      for (int e = tid; e < kD * kVT; e += kThreads) a.ht[hoff + static_cast<std::int64_t>(e / kVT) * kD + e % kVT] = nanf("");
    }
    return false;
  }
  seg::Pos p;
  if (!seg::pos(a, kSlotRows ? seg::kSlot : seg::kRow, row, p)) return false;
  b.seg = p.j;
  b.nseg = p.nseg;
  if (b.trans && b.seg == 0) return false;  // M_0 is never used: segment 0 starts from h0 itself
  b.hoff = (static_cast<std::int64_t>(p.n) * a.HV + b.hv) * kD * kD + b.v0;
  b.soff = (static_cast<std::int64_t>(p.slot0) * a.HV + b.hv) * kD * kD + b.v0;
  b.sq = sequence(a, p.n);
  b.c_begin = seg::begin(b.seg, b.nseg, b.sq.nch);
  b.c_end = seg::begin(b.seg + 1, b.nseg, b.sq.nch);
  b.slot0 = slot(a, b.sq, b.hv, 0);
  b.Tw = a.P + b.slot0 * C * C;
  b.Gg = a.G + b.slot0 * C;
  b.Bg = a.Bc + b.slot0 * C;
  return true;
}

// Chunk c's G and (with the delta rule) beta rows to s.G, s.beta: threads 0 .. C / 2 - 1 issue one cp.async each.
template <bool kDelta>
__device__ __forceinline__ void load_g_beta(float* G, float* beta, const StateTBlock& b, int c, int tid) {
  if (tid < C / 4) cp_async_16(smem_addr(G + tid * 4), b.Gg + c * C + tid * 4, true);
  else if (kDelta && tid < C / 2) cp_async_16(smem_addr(beta + (tid - C / 4) * 4), b.Bg + c * C + (tid - C / 4) * 4, true);
}

// The v rows i = r0 + g8 (+8) of the chunk starting at token t0 (len tokens), the slice's NN n-tiles, straight from
// global memory into the mma.m16n8 C layout (vr[n][half] the pair (i, 8 n + 2 t4 ..)); 0 past len and for an M
// block (no value input).
template <int kD, int NN>
__device__ __forceinline__ void load_v_rows(std::uint32_t (&vr)[NN][2], const GdnFwdArgs& a, const StateTBlock& b,
                                            int t0, int len, int r0, int g8, int t4) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = r0 + g8 + half * 8;
    const __nv_bfloat16* vrow = a.v + b.vo_at<kD>(a, t0 + i);
#pragma unroll
    for (int nn = 0; nn < NN; ++nn)
      vr[nn][half] = i < len && !b.trans ? *reinterpret_cast<const std::uint32_t*>(vrow + nn * 8 + 2 * t4) : 0u;
  }
}

// Its mirror for o: the rows i = r0 + g8 (+8) < len of the accumulators ao (mma.m16n8 C layout) to o as bf16 pairs.
template <int kD, int NN>
__device__ __forceinline__ void store_o_rows(const GdnFwdArgs& a, const StateTBlock& b, const float (&ao)[NN][4], int t0,
                                             int len, int r0, int g8, int t4) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = r0 + g8 + half * 8;
    if (i < len) {
      __nv_bfloat16* orow = a.o + b.vo_at<kD>(a, t0 + i);
#pragma unroll
      for (int nn = 0; nn < NN; ++nn)
        *reinterpret_cast<std::uint32_t*>(orow + nn * 8 + 2 * t4) = pack_bf16x2(ao[nn][half * 2], ao[nn][half * 2 + 1]);
    }
  }
}

// Rung 3's state step, the parts both state kernels share (state_t_kernel here, mma.sync; state_t_wgmma_kernel,
// gdn_state_wgmma.cuh): the epilogues between the products. The accumulators in mma.m16n8 C layout, acc[n][e] for
// n-tile n (wgmma's d[4n + e], the same element); pair(tile, i, col) the address of the bf16 pair (i, col..col+1)
// of a (C x kVT) shared tile in the kernel's own layout.
// Their decays are one ex2_approx (MUFU.EX2) of an exponent times log2 e each, where expf spent a range reduction:
// a row's (e^G, e^{G_L - G}) of expf's own argument times log2 e, P's elements of G_i log2 e - G_j log2 e with s.G
// (natural, the workspace's) scaled once per row and column a chunk: ~7 instructions an element of P with its mask
// and its column's G, where expf and a branch took ~17.5 (bench/glr/sm90_bwd_notes.md, "Fewer instructions per chunk
// in the state pass"). That scaling adds about ulp(|G| log2 e) to P's exponents, the order of G's own rounding (as
// the wy kernel's, WySmem::G). Decays below 2^-126 flush to 0; -Inf in G gives 0, a NaN stays NaN, and P's upper
// triangle is selected to 0, never a 0 factor.
// Phase A's epilogue, rows i = r0 + g8 (+8): X = beta . V - (beta e^G) . (K h) to s.x with the delta rule, else
// V_new = V and e^{G_last - G} V (its three bf16 pieces with a gate: s.vnd hi, s.x mid, s.T lo); P = scale
// tril(Gamma . Q K^T) as A fragments pa (n-tiles 2kk, 2kk+1 = k-tile kk). X (or V_new's pieces) first, then P:
// ax and vr are dead before P's decays start (one loop over both rose past 255 registers and spilled at K = 128).
template <bool kDelta, bool kStateOnly, int NN, class Smem, class Pair>
__device__ __forceinline__ void state_phase_a_epilogue(Smem& s, const GdnFwdArgs& a, int r0, int g8, int t4, float GL,
                                                       bool split, const std::uint32_t (&vr)[NN][2],
                                                       const float (&ax)[NN][4], const float (&sqk)[8][4],
                                                       std::uint32_t (&pa)[4][4], Pair pair) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = r0 + g8 + half * 8;
    const float Gi = s.G[i];
    const float bi = kDelta ? s.beta[i] : 0.f, bgi = bi * exp_approx(Gi), ed = exp_approx(GL - Gi);
#pragma unroll
    for (int nn = 0; nn < NN; ++nn) {  // the slice's NN column n-tiles (all 8 at kVT = 64)
      const int col = nn * 8 + 2 * t4;
      if constexpr (kDelta) {
        const float2 vf = unpack_bf16x2(vr[nn][half]);
        *pair(s.x, i, col) = pack_bf16x2(bi * vf.x - bgi * ax[nn][half * 2], bi * vf.y - bgi * ax[nn][half * 2 + 1]);
      } else {  // V_new = V (exact in bf16); e^{G_last - G} V in three bf16 pieces (see Phase C)
        const float2 vf = unpack_bf16x2(vr[nn][half]);
        *pair(s.vn, i, col) = vr[nn][half];
        const std::uint32_t hi = pack_bf16x2(ed * vf.x, ed * vf.y);
        *pair(s.vnd, i, col) = hi;
        if (split) {  // mid = bf16(ed v - hi) (one fma: the product's own rounding included), lo = bf16(the rest)
          const float2 hf = unpack_bf16x2(hi);
          const float e0 = fmaf(ed, vf.x, -hf.x), e1 = fmaf(ed, vf.y, -hf.y);
          const std::uint32_t mid = pack_bf16x2(e0, e1);
          const float2 mf = unpack_bf16x2(mid);
          *pair(s.x, i, col) = mid;
          *pair(s.T, i, col) = pack_bf16x2(e0 - mf.x, e1 - mf.y);
        }
      }
    }
  }
  if constexpr (!kStateOnly) {  // pass A: no o, no P
    const float Gi2[2] = {s.G[r0 + g8] * kLog2e, s.G[r0 + g8 + 8] * kLog2e};
#pragma unroll
    for (int nn = 0; nn < 8; ++nn) {  // P's 8 key n-tiles, each column's G read and scaled once for both rows
      const float2 Gj = *reinterpret_cast<const float2*>(s.G + nn * 8 + 2 * t4);
      const float Gj2[2] = {Gj.x * kLog2e, Gj.y * kLog2e};
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int i = r0 + g8 + half * 8;
        float pv[2];
#pragma unroll
        for (int u2 = 0; u2 < 2; ++u2) {
          const int j = nn * 8 + 2 * t4 + u2;
          const float gam = ex2_approx(Gi2[half] - Gj2[u2]);  // +Inf or NaN right of the diagonal: not selected
          pv[u2] = j <= i ? a.scale * gam * sqk[nn][half * 2 + u2] : 0.f;
        }
        pa[nn >> 1][(nn & 1) * 2 + half] = pack_bf16x2(pv[0], pv[1]);
      }
    }
  }
}
// O's Q h term scaled by scale e^G (rows i = r0 + g8 (+8)), before P V_new adds to it.
template <int NN, class Smem>
__device__ __forceinline__ void state_scale_o(const Smem& s, const GdnFwdArgs& a, int r0, int g8, float (&ao)[NN][4]) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const float eo = a.scale * exp_approx(s.G[r0 + g8 + half * 8]);
#pragma unroll
    for (int nn = 0; nn < NN; ++nn) {
      ao[nn][half * 2] *= eo;
      ao[nn][half * 2 + 1] *= eo;
    }
  }
}
// Phase B's epilogue (the delta rule): V_new = T X (an) to s.vn, e^{G_last - G} V_new to s.vnd, both bf16.
template <int NN, class Smem, class Pair>
__device__ __forceinline__ void state_phase_b_epilogue(Smem& s, int r0, int g8, int t4, float GL, const float (&an)[NN][4],
                                                       Pair pair) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = r0 + g8 + half * 8;
    const float ed = exp_approx(GL - s.G[i]);
#pragma unroll
    for (int nn = 0; nn < NN; ++nn) {
      const float x0 = an[nn][half * 2], x1 = an[nn][half * 2 + 1];
      *pair(s.vn, i, nn * 8 + 2 * t4) = pack_bf16x2(x0, x1);
      *pair(s.vnd, i, nn * 8 + 2 * t4) = pack_bf16x2(ed * x0, ed * x1);
    }
  }
}

// Rung 3's state kernel: the wy kernel leaves only T = (I + L)^-1; per chunk
//     X = beta . V - (beta e^G) . (K h)          (K h on the tensor cores, the row scales on the accumulators)
//     V_new = T X,  O = scale e^G . (Q h) + P V_new,  h = e^{G_last} h + K^T (e^{G_last - G} . V_new)
// with P = scale tril(Gamma . Q K^T) in registers as in rung 2. W and U never exist: the workspace traffic is
// T (8 KB a chunk) instead of W and U (32 KB). Three barriers a chunk (X and V_new each mix rows of all warps).
// Without the delta rule (kDelta false: Mamba2/SSD, RetNet, linear attention) V_new = V: no K h, no T, one
// barrier fewer. Grid (V / kVT, sequences x HV); block (vt, n HV + hv) walks sequence n's chunks in order.
// kVT: the slice width (Slice<kVT>, state_slice.cuh: 64, 32 or 16 value columns a block; the launcher picks it
// with state_slice_width, the backward's rule). Each block loads the whole q, k and T tiles of its chunks; only
// the value columns it owns change with kVT, and each output column's arithmetic (the same mma and FMA in the
// same order, reductions over K or the chunk only) does not: o and ht are bitwise the same at every width.
template <int kVT = 64>
struct StateTSmem {
  __nv_bfloat16 q[C * LD128];     // (C, K)
  __nv_bfloat16 k[2][C * LD128];  // (C, K) per buffer (chunk c in buffer c % 2)
  __nv_bfloat16 T[C * LD64];      // (C, C) (I + L)^-1; without the delta rule the (C, kVT) lo piece, row stride LD
  __nv_bfloat16 h[DK * Slice<kVT>::LD];   // (K, kVT) bf16 copy of the state slice
  __nv_bfloat16 x[C * Slice<kVT>::LD];    // (C, kVT) X; without the delta rule the mid piece of e^{G_last - G} V
  __nv_bfloat16 vn[C * Slice<kVT>::LD];   // (C, kVT) V_new
  __nv_bfloat16 vnd[C * Slice<kVT>::LD];  // (C, kVT) e^{G_last - G} V_new
  float G[C];
  float beta[C];
};

// Launch bounds: at 32 and 16 columns ptxas (CUDA 13.0), left to itself, aims at an occupancy step (128 or 168
// registers) and spills 4 or 8 bytes to reach it (<false, 64, 32>, <true, 128, 32>); a minimum of 1 block per SM
// lets it take the registers it needs (no spill at any width). 64 keeps today's bounds (0: none, the same
// registers and code as before the width was a parameter).
//
// The split-sequence state pass (seg::split(a); gdn_fwd_split_plan; segments by length, segments.cuh): blockIdx.y =
// row HV + hv, the row segments.cuh's (pass C: a segment row, pass A: an Es slot), and the block walks only its
// segment s's chunks (of its sequence's nseg). With kStateOnly false (pass C, grid (kD / kVT, seg::rows x HV); also
// the whole unsplit pass, one segment a sequence) it starts from h0 (s = 0) or from the Es slot of segment s - 1
// (the state entering s, written by combine_kernel), writes o, and ht from the last segment. With kStateOnly (pass
// A, grid (2 kD / kVT, seg::slots x HV): segments 0 .. nseg - 2 of the split sequences) it writes neither o nor ht and
// skips everything only o needs (q, Q h, Q K^T, P, P V_new): blocks x < kD / kVT run the real inputs from 0 (s = 0:
// from h0) and leave the segment's end state in Es slot s; blocks x >= kD / kVT run from h = I (K columns, sliced
// like V's) with no value input (v = 0, so X = -beta e^G (K h)) and leave M_s = A_last ... A_first in Ms slot s: the
// state update is h' = A_c h + B_c with one K x K map A_c for every value column, and this block computes A_c h
// column by column (s = 0 needs no M: these blocks return at once). Without the delta rule A_c = e^{G_last} I: the
// grid has no M blocks and combine_kernel forms the scalar itself. The same code, one template flag.
template <bool kDelta = true, int kD = DK, int kVT = 64, bool kStateOnly = false>
__global__ void __launch_bounds__(kThreads, kVT == 64 ? 0 : 1) state_t_kernel(const __grid_constant__ GdnFwdArgs a) {
  static_assert(kD == 64 || kD == 128, "K = V = 64 or 128");
  using SL = Slice<kVT>;
  constexpr int NN = SL::NN, NP = SL::NP, LDS = SL::LD;  // the slice's n-tiles, n-tile pairs, tile row stride
  static_assert(kD % kVT == 0, "the slices split V evenly; Q K^T keeps its C / 8 = 8 key tiles whatever kVT");
  constexpr int kLd = kD + 8;  // row stride of the q and k tiles
  constexpr int MT = kD / 64;  // 16-row tiles of this warp's state rows (kD / 4 rows a warp)
  extern __shared__ __align__(16) char smem_raw[];
  StateTSmem<kVT>& s = *reinterpret_cast<StateTSmem<kVT>*>(smem_raw);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g8 = lane >> 2, t4 = lane & 3;
  StateTBlock b;
  if (!state_t_block<kD, kVT, kStateOnly>(a, tid, b)) return;
  const Seq sq = b.sq;
  const int c_begin = b.c_begin, c_end = b.c_end;
  const int r0 = warp * 16;  // this warp's rows of the (C x kVT) tiles
  const int d0 = warp * (kD / 4);  // this warp's rows of the state slice (K x kVT)
  const std::int64_t qrow = static_cast<std::int64_t>(a.H) * kD;
  auto pair = [](__nv_bfloat16* t, int i, int col) { return reinterpret_cast<std::uint32_t*>(t + i * LDS + col); };

  // Group Q: q and k of chunk c (issued once every warp is past phase A of chunk c - 1).
  // Group S: T, G, beta of chunk c (issued once every warp is past phase B of chunk c - 1; without the delta
  // rule G only, with group Q).
  auto load_qk = [&](int c) {
    const int t0 = c * C, len = min(C, sq.len - t0);
    if constexpr (!kStateOnly) load_tile<kD>(s.q, a.q + b.qk_at<kD>(a, t0), qrow, len, tid);
    load_tile<kD>(s.k[c & 1], a.k + b.qk_at<kD>(a, t0), qrow, len, tid);
  };
  auto load_small = [&](int c) {
    if constexpr (kDelta) {
      const __nv_bfloat16* Tc = b.Tw + static_cast<std::int64_t>(c) * C * C;
#pragma unroll
      for (int it = 0; it < C * 8 / kThreads; ++it) {
        const int e = tid + it * kThreads, r = e >> 3, cc = e & 7;
        cp_async_16(smem_addr(s.T + r * LD64 + cc * 8), Tc + r * C + cc * 8, true);
      }
    }
    load_g_beta<kDelta>(s.G, s.beta, b, c, tid);
  };

  const float* h_in = b.h_in<kD, kStateOnly>(a);
  float hs[MT][NN][4];  // the state slice: rows d0 + 16 mt + g8 (+8), columns 8 n + 2 t4 (+1)
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nn = 0; nn < NN; ++nn)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float2 x = b.h_start<kD>(h_in, d0 + mt * 16 + g8 + half * 8, nn * 8 + 2 * t4);
        hs[mt][nn][half * 2] = x.x;
        hs[mt][nn][half * 2 + 1] = x.y;
      }
  auto write_h_bf16 = [&]() {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nn = 0; nn < NN; ++nn)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int d = d0 + mt * 16 + g8 + half * 8, col = nn * 8 + 2 * t4;
          *reinterpret_cast<std::uint32_t*>(s.h + d * LDS + col) =
              pack_bf16x2(hs[mt][nn][half * 2], hs[mt][nn][half * 2 + 1]);
        }
  };
  write_h_bf16();
  if (c_begin < c_end) {
    load_qk(c_begin);
    load_small(c_begin);
    cp_async_commit();
    cp_async_wait<0>();
  }
  __syncthreads();

  for (int c = c_begin; c < c_end; ++c) {
    const int t0 = c * C, len = min(C, sq.len - t0);
    const __nv_bfloat16* kc = s.k[c & 1];
    // v rows of this warp, straight into accumulator layout (issued first, used after the K h loop).
    std::uint32_t vr[NN][2];
    load_v_rows<kD>(vr, a, b, t0, len, r0, g8, t4);

    // Phase A: K h (delta rule only), Q h (C x kVT, inner K) and Q K^T (causal column tiles), warp rows
    // r0..r0+15. The pair loop runs over the C / 16 = 4 key tile pairs of Q K^T; the first NP of them are the
    // slice's column pairs too (all four at kVT = 64).
    float ax[NN][4], ao[NN][4], sqk[8][4];
#pragma unroll
    for (int nn = 0; nn < 8; ++nn)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (nn < NN) ax[nn][e] = ao[nn][e] = 0.f;
        sqk[nn][e] = 0.f;
      }
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
      std::uint32_t ak[4], aq[4];
      if constexpr (kDelta) ldsm_a(ak, kc, kLd, r0, ks * 16, lane);
      if constexpr (!kStateOnly) ldsm_a(aq, s.q, kLd, r0, ks * 16, lane);
#pragma unroll
      for (int np = 0; np < C / 16; ++np) {
        if (np < NP) {
          std::uint32_t bh4[4];
          ldsm_b_kn(bh4, s.h, LDS, ks * 16, np * 16, lane);
          if constexpr (kDelta) {
            mma_bf16_16816(ax[2 * np], ak, bh4[0], bh4[1]);
            mma_bf16_16816(ax[2 * np + 1], ak, bh4[2], bh4[3]);
          }
          if constexpr (!kStateOnly) {
            mma_bf16_16816(ao[2 * np], aq, bh4[0], bh4[1]);
            mma_bf16_16816(ao[2 * np + 1], aq, bh4[2], bh4[3]);
          }
        }
        if (!kStateOnly && np <= warp) {  // causal: key tiles j < r0 + 16
          std::uint32_t bk[4];
          ldsm_b_nk(bk, kc, kLd, np * 16, ks * 16, lane);
          mma_bf16_16816(sqk[2 * np], aq, bk[0], bk[1]);
          mma_bf16_16816(sqk[2 * np + 1], aq, bk[2], bk[3]);
        }
      }
    }
    const float GL = s.G[C - 1];
    // Without the delta rule ht is a sum over T alone of exact bf16 products k v, and kgate's accumulation gate
    // holds it to (T + 4) u_f32 + 8 u_f32 per element (8.3e-7 at T = 2): e^{G_L - G} V rounded once to bf16
    // (2^-9 relative) missed that by 1500x on the H200 (ecef461, Mamba2 and RetNet). So with a gate the
    // update's B operand goes in three bf16 pieces hi + mid + lo, equal to the fp32 product e^{G_L - G} v to
    // 2^-24 relative, and the update is three mma where it was one. Without a gate (linear attention) e^0 v = v
    // is exact: one piece. With the delta rule V_new = T X is itself rounded to bf16 (ht reduces over K too): one.
    const bool split = !kDelta && a.gate != 0;
    std::uint32_t pa[4][4];  // P as A fragments: n-tiles 2kk, 2kk+1 of the accumulator = k-tile kk
    state_phase_a_epilogue<kDelta, kStateOnly>(s, a, r0, g8, t4, GL, split, vr, ax, sqk, pa, pair);
    state_scale_o(s, a, r0, g8, ao);
    __syncthreads();  // X (or V_new) visible; every warp is done with q and h (and, without delta, G)
    if (c + 1 < c_end) {
      load_qk(c + 1);
      if constexpr (!kDelta) load_small(c + 1);
    }
    cp_async_commit();

    if constexpr (kDelta) {
      // Phase B: V_new = T X (T lower triangular: k tiles <= warp).
      float an[NN][4];
#pragma unroll
      for (int nn = 0; nn < NN; ++nn)
#pragma unroll
        for (int e = 0; e < 4; ++e) an[nn][e] = 0.f;
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        if (ks <= warp) {
          std::uint32_t at[4];
          ldsm_a(at, s.T, LD64, r0, ks * 16, lane);
#pragma unroll
          for (int np = 0; np < NP; ++np) {
            std::uint32_t bx[4];
            ldsm_b_kn(bx, s.x, LDS, ks * 16, np * 16, lane);
            mma_bf16_16816(an[2 * np], at, bx[0], bx[1]);
            mma_bf16_16816(an[2 * np + 1], at, bx[2], bx[3]);
          }
        }
      }
      state_phase_b_epilogue(s, r0, g8, t4, GL, an, pair);
      __syncthreads();  // V_new visible; every warp is done with T, X, G, beta
      if (c + 1 < c_end) load_small(c + 1);
      cp_async_commit();
    }

    // Phase C: O += P V_new, O stored (not by pass A); h = e^{G_last} h + K^T (e^{G_last - G} V_new).
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      if (!kStateOnly && ks <= warp) {
#pragma unroll
        for (int np = 0; np < NP; ++np) {
          std::uint32_t bv[4];
          ldsm_b_kn(bv, s.vn, LDS, ks * 16, np * 16, lane);
          mma_bf16_16816(ao[2 * np], pa[ks], bv[0], bv[1]);
          mma_bf16_16816(ao[2 * np + 1], pa[ks], bv[2], bv[3]);
        }
      }
    }
    if constexpr (!kStateOnly) store_o_rows<kD>(a, b, ao, t0, len, r0, g8, t4);
    const float decay = exp_approx(GL);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nn = 0; nn < NN; ++nn)
#pragma unroll
        for (int e = 0; e < 4; ++e) hs[mt][nn][e] *= decay;
#pragma unroll
    for (int ks = 0; ks < C / 16; ++ks) {
      std::uint32_t ak[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) ldsm_a_trans(ak[mt], kc, kLd, d0 + mt * 16, ks * 16, lane);
#pragma unroll
      for (int np = 0; np < NP; ++np) {
        std::uint32_t bv[4];
        if (!kDelta && split) {  // the small pieces first: lo, then mid (s.T and s.x are free without the delta rule)
          ldsm_b_kn(bv, s.T, LDS, ks * 16, np * 16, lane);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            mma_bf16_16816(hs[mt][2 * np], ak[mt], bv[0], bv[1]);
            mma_bf16_16816(hs[mt][2 * np + 1], ak[mt], bv[2], bv[3]);
          }
          ldsm_b_kn(bv, s.x, LDS, ks * 16, np * 16, lane);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            mma_bf16_16816(hs[mt][2 * np], ak[mt], bv[0], bv[1]);
            mma_bf16_16816(hs[mt][2 * np + 1], ak[mt], bv[2], bv[3]);
          }
        }
        ldsm_b_kn(bv, s.vnd, LDS, ks * 16, np * 16, lane);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_bf16_16816(hs[mt][2 * np], ak[mt], bv[0], bv[1]);
          mma_bf16_16816(hs[mt][2 * np + 1], ak[mt], bv[2], bv[3]);
        }
      }
    }
    write_h_bf16();      // h was last read in phase A, before the first barrier
    cp_async_wait<0>();  // chunk c + 1: q, k, T, G, beta
    __syncthreads();     // h and chunk c + 1's tiles visible; every warp is done with k, vn, vnd
  }

  float* h_out = b.h_out<kD, kStateOnly>(a);
  if (h_out) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nn = 0; nn < NN; ++nn)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int d = d0 + mt * 16 + g8 + half * 8, col = nn * 8 + 2 * t4;
          *reinterpret_cast<float2*>(h_out + static_cast<std::int64_t>(d) * kD + col) =
              make_float2(hs[mt][nn][half * 2], hs[mt][nn][half * 2 + 1]);
        }
  }
}

// Pass B of the split state pass, between pass A (state_t_kernel<.., kStateOnly>) and pass C: per (sequence, value
// head) and 8 state columns, the segments in order, Es[s] = M_s Es[s - 1] + Es[s] for s = 1 .. nseg - 2 in fp32
// (Es[s]: the Es slot of the sequence's segment s). Es[0] is already the state entering segment 1 (pass A ran
// segment 0 from h0), so afterwards Es[s] is the state entering segment s + 1. Grid (kD / 8, seg::combs x HV): one row
// per sequence of 3 segments or more (fewer have nothing to combine; rows past the real count return), kThreads
// threads: thread t owns row t % kD and kPer of the
// 8 columns; the entering state's (kD x 8) slice stays in shared memory. Each sum in a fixed order (from E, then
// fmaf over the rows of S in order): deterministic. Dynamic shared memory: combine_smem_bytes(kD).
// Without the delta rule A_c = e^{G_last} I, so M_s is the scalar m_s = prod over the segment's chunks of
// e^{G_last} (the G workspace's last entries, multiplied in chunk order) and pass A has no M blocks:
// Es[s] = fmaf(m_s, Es[s - 1], Es[s]).
// kReverse: the backward's dh pass (gdn_bwd_mma.cuh, launch_state_passes), the adjoint recurrence in reverse order:
// Es slot s holds the gradient entering segment s + 1 from 0 (its pass A'; slot nseg - 2 from dht, already whole),
// and for s = nseg - 3 .. 0, Es[s] = M_{s+1}^T Es[s + 1] + Es[s] (M_{s+1}: Ms slot s + 1, read by columns; without
// the delta rule the scalar m_{s+1}), the same fixed order of sums. Afterwards Es[s] is the gradient leaving segment s.
constexpr std::size_t combine_smem_bytes(int kD) { return static_cast<std::size_t>(kD) * 8 * sizeof(float); }
template <int kD, bool kDelta = true, bool kReverse = false>
__global__ void __launch_bounds__(kThreads) combine_kernel(const __grid_constant__ GdnFwdArgs a) {
  constexpr int kCols = 8, kGroups = kThreads / kD, kPer = kCols / kGroups;
  static_assert(kThreads % kD == 0 && kCols % kGroups == 0, "rows x column groups = the block");
  extern __shared__ __align__(16) char smem_raw[];
  float* prev = reinterpret_cast<float*>(smem_raw);  // (kD, kCols): the state entering segment s
  if (a.varlen() && a.table[0] != 0) return;  // invalid packed offsets: pass C writes NaN
  seg::Pos p;  // this row's sequence (one with nseg >= 3: segments.cuh's combine rows); past the real count: nothing
  if (!seg::pos(a, seg::kComb, static_cast<int>(blockIdx.y) / a.HV, p)) return;
  const int hv = static_cast<int>(blockIdx.y) % a.HV, nseg = p.nseg;
  const int tid = threadIdx.x, d = tid % kD, j0 = (tid / kD) * kPer;
  const std::int64_t seg_states = static_cast<std::int64_t>(a.HV) * kD * kD;  // one Es / Ms slot, every value head
  const std::int64_t head = (static_cast<std::int64_t>(p.slot0) * a.HV + hv) * kD * kD;  // slot 0 of the sequence
  const std::int64_t c0 = static_cast<std::int64_t>(blockIdx.x) * kCols;
  const std::int64_t first = kReverse ? (nseg - 2) * seg_states : 0;  // the slot the chain starts from
  for (int e = tid; e < kD * kCols; e += kThreads) prev[e] = a.Es[first + head + (e / kCols) * kD + c0 + e % kCols];
  __syncthreads();
  for (int step = 1; step + 1 < nseg; ++step) {
    const int sg = kReverse ? nseg - 2 - step : step;  // the slot this step completes
    const int ms = kReverse ? sg + 1 : sg;                // the segment whose map it applies
    float* E = a.Es + sg * seg_states + head + static_cast<std::int64_t>(d) * kD + c0 + j0;
    float acc[kPer];
    if constexpr (kDelta) {
      // row d of M (forward), or column d of M: row d of M^T (reverse)
      const float* M = a.Ms + ms * seg_states + head + (kReverse ? d : static_cast<std::int64_t>(d) * kD);
#pragma unroll
      for (int j = 0; j < kPer; ++j) acc[j] = E[j];
#pragma unroll 4
      for (int k = 0; k < kD; k += 4) {
        float4 m;
        if constexpr (kReverse)
          m = make_float4(M[k * kD], M[(k + 1) * kD], M[(k + 2) * kD], M[(k + 3) * kD]);
        else
          m = *reinterpret_cast<const float4*>(M + k);
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
          acc[j] = fmaf(m.x, prev[k * kCols + j0 + j], acc[j]);
          acc[j] = fmaf(m.y, prev[(k + 1) * kCols + j0 + j], acc[j]);
          acc[j] = fmaf(m.z, prev[(k + 2) * kCols + j0 + j], acc[j]);
          acc[j] = fmaf(m.w, prev[(k + 3) * kCols + j0 + j], acc[j]);
        }
      }
    } else {  // M_s = m_s I
      const Seq sq = sequence(a, p.n);
      const int c_begin = seg::begin(ms, nseg, sq.nch), c_end = seg::begin(ms + 1, nseg, sq.nch);
      float m = 1.f;
      for (int c = c_begin; c < c_end; ++c) m *= expf(a.G[slot(a, sq, hv, c) * C + C - 1]);
#pragma unroll
      for (int j = 0; j < kPer; ++j) acc[j] = fmaf(m, prev[d * kCols + j0 + j], E[j]);
    }
    __syncthreads();  // every thread is done reading prev
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      prev[d * kCols + j0 + j] = acc[j];
      E[j] = acc[j];
    }
    __syncthreads();
  }
}

}  // namespace gdn

// Why gdn_fwd_mma would refuse a (otherwise valid: glr::Params::validate) problem, or null if it takes it.
// The sizes the grids allow, the pointers' alignment, the workspace, and for rungs 1 and 2 the member and
// layout they were written for. Shared by gdn_fwd_mma and glr's dispatch (glr/cuda/sm90/forward.cu).
inline const char* gdn_fwd_mma_refusal(const GdnFwdArgs& a, GdnFwdVariant variant) {
  auto misaligned = [](const void* p, std::uintptr_t n) { return reinterpret_cast<std::uintptr_t>(p) % n != 0; };
  const bool wu = variant != GdnFwdVariant::t_only;
  if (a.B < 1 || a.H < 1 || a.HV < a.H || a.HV % a.H != 0 || a.T < 0) return "sizes (B, H >= 1, HV a multiple of H, T >= 0)";
  if (a.D != 64 && a.D != 128) return "head dim (K = V = 64 or 128)";
  if (a.varlen() ? (a.B != 1 || a.chunk_slots() > 0x7fffffffLL || (!a.cu_seqlens) == (!a.cu_seqlens32))
                 : static_cast<long long>(a.B) * a.HV > 65535)
    return a.varlen() ? "packed sequences need B = 1 and one offset array" : "B HV > 65535";
  if (static_cast<long long>(a.num_seqs()) * a.HV > 65535) return "sequences x HV > 65535";
  if (a.segs < 1 || a.seg_len < 1 || (a.segs > 1 && wu)) return "split state pass segments (segs, seg_len >= 1; rung 3 only)";
  if (seg::rows(a) * a.HV > 65535 || seg::slots(a) * a.HV > 65535) return "split segments (or slots) x HV > 65535";
  if (static_cast<long long>(a.T) * (a.varlen() ? 1 : a.B) * a.HV * a.D >= (1LL << 62)) return "too many tokens";
  if (!a.q || !a.k || !a.v || !a.o || (a.gate != 0 && !a.g) || (a.delta && !a.beta)) return "a null tensor";
  if (a.gate < 0 || a.gate > 2) return "gate";
  if (misaligned(a.q, 16) || misaligned(a.k, 16) || misaligned(a.v, 16) || misaligned(a.o, 4) ||
      misaligned(a.h0, 8) || misaligned(a.ht, 8) || misaligned(a.g, a.g_bf16 ? 2 : 4) ||
      misaligned(a.beta, a.beta_bf16 ? 2 : 4))
    return "alignment (q, k, v 16 bytes; o 4; h0, ht 8)";
  if (!a.status || (wu && (!a.W || !a.U)) || !a.P || !a.G || !a.Bc || (a.varlen() && !a.table) || misaligned(a.W, 16) ||
      misaligned(a.U, 16) || misaligned(a.P, 16) || misaligned(a.G, 16) || misaligned(a.Bc, 16) ||
      (seg::split(a) && (!a.Es || !a.Ms || misaligned(a.Es, 16) || misaligned(a.Ms, 16) || (a.varlen() && !a.segtab))))
    return "workspace (carve it with gdn_fwd_workspace_carve)";
  if (wu && (!a.delta || a.gate != 1 || a.HV != a.H || a.varlen() || a.g_bf16 || a.beta_bf16 || a.D != 128))
    return "rungs 1 and 2 take only Gated DeltaNet, fp32 g and beta, HV = H, dense batches, K = V = 128";
  return nullptr;
}

// The slice width of rung 3's state kernel: the backward's rule (state_slice_width, state_slice.cuh) on its grid
// rows, segments x HV (seg::rows: sequences unsplit; packed and split an upper bound), with V = K = a.D: the widest
// of 64 and 32 columns that still gives each of `sms` multiprocessors a block, else 16 (B1 T32768 H16 K128 unsplit:
// 16, 128 blocks where 64 gave 32; in 8 segments: 64, 256 blocks). Rungs 1 and 2 stay at 64. The split pass's pass
// A always runs at 64.
inline int gdn_fwd_slice_width(const GdnFwdArgs& a, int sms) {
  return state_slice_width(seg::rows(a) * (a.HV > 0 ? a.HV : a.H), a.D, sms);
}

// The split-sequence state pass (state_t_kernel's comment; issue 16: few, long sequences): the number of segments
// from the shapes and the multiprocessor count only, never from timing, so one problem on one device always runs
// the same arithmetic (bitwise deterministic run to run; split and unsplit results differ by rounding only).
// Split only where the unsplit pass gives at most half of the multiprocessors a 64-column block (heads x D / 64
// <= sms / 2, heads = sequences x HV: each block is then a chain over the whole sequence, 512 chunk steps at T =
// 32768) and every segment keeps at least kSplitMinChunks chunks: segments = 2 sms / (heads D / 64) (pass C then
// has about two 64-column blocks per multiprocessor, what its 108 KB of shared memory allows), at most
// chunks / kSplitMinChunks and 64, and none below kSplitMinSegments. chunks: chunks per sequence (packed
// sequences: the average, T / 64 / N). The cost: pass A runs every segment but the last twice without the output
// work (E from the real inputs, M from I), pass B (combine_kernel) segs - 2 small fp32 products per head, pass C
// the usual kernel per segment: about 2-2.5x the unsplit state work, so the split pays only where the unsplit grid
// leaves much of the GPU idle. Timed on an H200 (2026-12-05, bench/glr/sm90_check.sh; bench/glr/sm90_notes.md):
// B1 T32768 H16 (32 blocks) unsplit 2.760 ms, 4 / 8 / 16 segments 1.500 / 1.238 / 1.310; HV32 (64 blocks, between
// a quarter and a half, where the first rule left it unsplit) 3.295 ms, 4 / 8 / 16 segments 2.282 / 2.342 / 2.474:
// the rule's choices (8 and 4) are the fastest measured at both.
inline constexpr int kSplitMinChunks = 16;
// Pass A (all segments at once) and pass C (likewise) run one after the other: the chain is 2 / segs of the
// sequence, so 2 segments are as long as unsplit at twice the work, and 3 save a third.
inline constexpr int kSplitMinSegments = 4;
constexpr int split_segments(long long heads, int D, long long chunks, int sms) {
  const long long blocks = heads * (D / 64);
  if (blocks <= 0 || 2 * blocks > sms) return 1;
  long long s = 2LL * sms / blocks;
  if (s > chunks / kSplitMinChunks) s = chunks / kSplitMinChunks;
  if (s > 64) s = 64;
  return s >= kSplitMinSegments ? static_cast<int>(s) : 1;
}
static_assert(split_segments(16, 128, 512, 132) == 8 &&   // B1 T32768 H16: 8 segments of 64 chunks
                  split_segments(32, 128, 512, 132) == 4 &&   // B1 T32768 H16 HV32: 4 segments
                  split_segments(8, 128, 512, 132) == 16 && split_segments(17, 128, 512, 132) == 7 &&
                  split_segments(33, 128, 512, 132) == 4 && split_segments(34, 128, 512, 132) == 1 &&  // half the SMs
                  split_segments(128, 128, 64, 132) == 1 &&   // B8 T4096 H16: enough blocks
                  split_segments(16, 128, 64, 132) == 4 &&    // B1 T4096 H16: segments of 16 chunks
                  split_segments(16, 128, 63, 132) == 1 &&    // T < 4096: segments too short or too few
                  split_segments(1, 128, 32, 132) == 1 &&     // 2 segments: no shorter chain
                  split_segments(1, 64, 512, 132) == 32 && split_segments(1, 128, 8192, 132) == 64 &&
                  split_segments(66, 64, 512, 132) == 4 && split_segments(67, 64, 512, 132) == 1,
              "the split rule's table");
inline int gdn_fwd_split_segments(const GdnFwdArgs& a, int sms) {
  const long long seqs = a.num_seqs();
  if (seqs <= 0) return 1;
  const long long chunks = (static_cast<long long>(a.T) + gdn::C - 1) / gdn::C / (a.varlen() ? seqs : 1);
  return split_segments(seqs * (a.HV > 0 ? a.HV : a.H), a.D, chunks, sms);
}

// The split by length (segments.cuh; issue 16 item 1: packed sequences whose longest one sets the chain): segs
// (at most per sequence) and seg_len (chunks), from what the host knows, never the individual lengths (they stay on
// the device: no copy back, the op asynchronous and graph-capturable).
// Dense batches (every sequence nch chunks): split_segments' count s, as seg_len = floor(nch / s) with the cap s:
// exactly s balanced segments (B1 T32768 H16: 8 of 64 chunks, HV32: 4 of 128; B8 T4096 H16: unsplit), the table above.
// Packed sequences, the cost model (H100, 2026-12-05, results/glr/sm90/h100-2026-12-05b; bench/glr/sm90_notes.md,
// "Split by length"): a 64-column block's chunk step costs about t = 6 us whether one or two blocks share a
// multiprocessor (B8 T4096 H16: 64 steps, 0.441 ms; the packed 32k shape unsplit: its 12288-token sequence's 192
// steps, 1.139 ms), and two blocks fit a multiprocessor (shared memory), so a pass costs about
//   t max(longest chain, P),  P = chunks x HV x (D / 64) / (2 SMs)   (the work's floor: every block-step at 2 a SM);
// P is what the host knows (chunks <= ceil(T / 64) + N, the chunk slots). Splitting a sequence adds pass A (its
// segments but the last once more, E and M blocks, twice the blocks: about 0.8 of a pass C step each, B1 T32768
// HV32 on the H100 0.69 ms for 128 steps against pass C's 0.880) and a combine step per segment (fp32, latency
// bound: 0.28 ms for 240 (sequence, head) rows x 2 steps when every sequence was cut in 4, 0.048 for B1 HV32's 32
// rows x 2). So cut only what is longer than about the work's floor: seg_len = max(kSplitMinChunks, P), sequences
// shorter than 2 seg_len stay whole (one segment: no pass A, no combine, no Es slot), longer ones in segments of
// seg_len .. 2 seg_len - 1 chunks; the chains of passes A and C are then at most 2 P each, where the unsplit pass
// runs the longest sequence's. Nothing is cut unless a sequence of all the chunks would take kSplitMinSegments
// segments (chunks >= 4 seg_len; 2 segments do not shorten a chain: pass A + pass C = the whole). A batch whose
// sequences are all shorter than 2 seg_len pays only the empty launches (segment table, pass A and combine blocks
// that exit: a few microseconds). The packed 32k shape (15 sequences, longest 12288) at H16: P = 64, its longest in
// 3 segments of 64, the rest whole: expected pass A 64 steps at 0.8 t (0.3-0.35 ms), pass C max(79 (the 5000-token
// sequence), 64) steps (0.45-0.5 ms), one combine step: about 0.8-0.85 ms for the state pass against 1.139
// (bench/glr/sm90_notes.md, "Split by length"). At HV32 P = 128: nothing of that batch is cut (192 < 256; cut at 64
// the model gives about 170 steps against 192, within its error). One long packed sequence (N = 1, T = 32768)
// splits as B1: H16 8, HV32 4.
struct SplitPlan {
  int segs = 1, len = 1;  // GdnFwdArgs::segs, seg_len
};
inline constexpr int kSplitMaxSegments = 64;  // per sequence
constexpr SplitPlan packed_split_plan(long long chunks, long long heads, int D, int sms) {
  const long long work = chunks * heads * (D / 64), floor_steps = (work + 2LL * sms - 1) / (2LL * sms);
  const long long len = floor_steps > kSplitMinChunks ? floor_steps : kSplitMinChunks;
  if (chunks < kSplitMinSegments * len) return {};
  return {kSplitMaxSegments, static_cast<int>(len)};
}
static_assert(packed_split_plan(527, 16, 128, 132).len == 64 &&   // the packed 32k shape, H16: segments of 64 .. 127
                  packed_split_plan(527, 32, 128, 132).len == 128 &&  // HV32: segments of 128 .. 255 (none there)
                  packed_split_plan(513, 16, 128, 132).len == 63 &&   // N = 1, T = 32768: 8 segments, as B1
                  seg::count(64, 63, 512) == 8 && seg::count(64, 125, 512) == 4 &&
                  packed_split_plan(513, 32, 128, 132).len == 125 &&  // HV32: 4
                  seg::count(64, 64, 192) == 3 && seg::count(64, 64, 79) == 1 &&  // the 32k shape's 12288 and 5000
                  packed_split_plan(520, 16, 128, 132).len == 64 && seg::count(64, 64, 64) == 1 &&  // 8 x 4096: whole
                  packed_split_plan(64 + 8, 16, 128, 132).len == 16 && seg::count(64, 16, 8) == 1 &&  // 8 x 512: whole
                  packed_split_plan(32 + 2, 16, 128, 132).segs == 1,  // 2048 tokens: 34 < 4 x 16, nothing cut
              "the packed split rule's table");
inline SplitPlan gdn_fwd_split_plan(const GdnFwdArgs& a, int sms) {
  const long long heads = a.HV > 0 ? a.HV : a.H;
  if (a.num_seqs() <= 0) return {};
  if (a.varlen()) return packed_split_plan(a.chunk_slots(), heads, a.D, sms);
  const long long nch = (static_cast<long long>(a.T) + gdn::C - 1) / gdn::C;
  const int s = split_segments(a.B * heads, a.D, nch, sms);
  return s > 1 ? SplitPlan{s, static_cast<int>(nch / s)} : SplitPlan{};
}

}  // namespace glr::cuda::sm90
#include "gdn_state_wgmma.cuh"  // state_t_wgmma_kernel, rung 3's state kernel on wgmma (GLR_FWD_WGMMA=1)
namespace glr::cuda::sm90 {

// The launchers: nvcc's, and the host emulator's (GLR_SM90_EMU_LAUNCHERS, set by glr/cuda/sm90/emu/sm90_emu.hpp
// with the emulated device's state_slice_sms; the stage-by-stage checks of tests/glr_sm90 launch by hand), one
// sequence of launches for both (launch_kernel, mma_sync.cuh).
#if defined(__CUDACC__) || defined(GLR_SM90_EMU_LAUNCHERS)
namespace gdn {
// Rung 3's state kernel at one slice width (its shared-memory limit: launch_kernel's, mma_sync.cuh).
// kStateOnly: the split pass's pass A (grid (2 kD / kVT, seg::slots x HV), without the delta rule (kD / kVT, ..):
// no M blocks); else pass C or the unsplit pass (grid (kD / kVT, seg::rows x HV)).
template <bool kDelta, int kD, int kVT, bool kStateOnly = false>
inline cudaError_t launch_state_t(const GdnFwdArgs& a, cudaStream_t stream) {
  if constexpr (kVT == 64)  // GLR_FWD_WGMMA=1: on wgmma (64 columns only: gdn_state_wgmma.cuh)
    if (state_wgmma_requested()) return launch_state_t_wgmma<kDelta, kD, kStateOnly>(a, stream);
  // pass A: E blocks, and with the delta rule M blocks (without it M_s is a scalar: combine_kernel)
  const dim3 grid = kStateOnly ? dim3((kDelta ? 2 : 1) * kD / kVT, static_cast<unsigned>(seg::slots(a)) * a.HV)
                               : dim3(kD / kVT, static_cast<unsigned>(seg::rows(a)) * a.HV);
  return launch_kernel(&state_t_kernel<kDelta, kD, kVT, kStateOnly>, grid, kThreads, sizeof(StateTSmem<kVT>), stream, a,
                       emu_smem);
}
// Pass B (kReverse: the backward's reverse combine) over the sequences of 3 segments or more (seg::combs, an upper
// bound for packed sequences); nothing to combine where none can have 3.
template <int kD, bool kDelta, bool kReverse = false>
inline cudaError_t launch_combine(const GdnFwdArgs& a, cudaStream_t stream) {
  if (seg::combs(a) == 0) return cudaSuccess;
  return launch_kernel(&combine_kernel<kD, kDelta, kReverse>, dim3(kD / 8, static_cast<unsigned>(seg::combs(a)) * a.HV),
                       kThreads, combine_smem_bytes(kD), stream, a, emu_smem);
}
// Packed sequences, split: the segment table (after the chunk table; A: GdnFwdArgs or GdnBwdArgs).
template <class A>
inline cudaError_t launch_segment_table(const A& a, cudaStream_t stream) {
  if (seg::table_words(a) == 0) return cudaSuccess;
  return launch_kernel(&segment_table_kernel<A>, dim3(1), kThreads, segment_table_smem_bytes, stream, a, emu_smem);
}
// The split pass's passes A and B (seg::split(a); pass C is launch_state_t at the chosen width), the segment
// table first. wgmma: pass A on state_t_wgmma_kernel (else as launch_state_t picks).
template <bool kDelta, int kD>
inline cudaError_t launch_split_ab(const GdnFwdArgs& a, cudaStream_t stream, bool wgmma = false) {
  cudaError_t e = launch_segment_table(a, stream);
  if (e == cudaSuccess)
    e = wgmma ? launch_state_t_wgmma<kDelta, kD, true>(a, stream) : launch_state_t<kDelta, kD, 64, true>(a, stream);
  return e != cudaSuccess ? e : launch_combine<kD, kDelta>(a, stream);
}
}  // namespace gdn

// The kernels of one rung and member, their shared memory, and the launch grids. vt: rung 3's slice width
// (64, 32 or 16, chosen by gdn_fwd_mma); rungs 1 and 2 take 64 only.
template <int kRung, bool kDelta, int kD>
inline cudaError_t gdn_fwd_mma_launch(const GdnFwdArgs& a, cudaStream_t stream, cudaEvent_t between, int vt) {
  const int HV = a.HV;
  auto* wy = &gdn::wy_kernel<kRung, kDelta, kD>;
  const std::size_t wy_smem = gdn::wy_smem_bytes(kRung);
  auto* state = kRung == 1 ? &gdn::state_kernel<false> : &gdn::state_kernel<true>;  // rungs 1, 2
  const std::size_t state_smem = kRung == 1 ? sizeof(gdn::StateSmem<false>) : sizeof(gdn::StateSmem<true>);
  cudaError_t e = cudaSuccess;
  if (a.varlen()) {
    e = launch_kernel(&gdn::chunk_table_kernel, dim3(1), gdn::kThreads, gdn::table_smem_bytes, stream, a, emu_smem);
    if (e != cudaSuccess) return e;
  }
  const long long wy_cols = a.varlen() ? a.chunk_slots() : (a.T + gdn::C - 1) / gdn::C;
  const int wy_rows = a.varlen() ? HV : a.B * HV;
  if (wy_cols > 0) {
    e = launch_kernel(wy, dim3(static_cast<unsigned>(wy_cols), wy_rows), gdn::kThreads, wy_smem, stream, a, emu_smem);
    if (e != cudaSuccess) return e;
  }
  if (between != nullptr && (e = cudaEventRecord(between, stream)) != cudaSuccess) return e;
  if constexpr (kRung == 3) {
    if (seg::split(a) && (e = gdn::launch_split_ab<kDelta, kD>(a, stream)) != cudaSuccess) return e;
    e = vt == 64   ? gdn::launch_state_t<kDelta, kD, 64>(a, stream)
        : vt == 32 ? gdn::launch_state_t<kDelta, kD, 32>(a, stream)
                   : gdn::launch_state_t<kDelta, kD, 16>(a, stream);
  } else {
    e = launch_kernel(state, dim3(kD / gdn::VT, a.num_seqs() * HV), gdn::kThreads, state_smem, stream, a, emu_smem);
  }
  if (e != cudaSuccess) return e;
  if (a.varlen()) {
    // a grid-stride loop: on the emulator 2 blocks (of 128 threads) do what 256 x 256 do on the GPU
    e = launch_kernel(&gdn::poison_kernel, dim3(256), 256, 0, stream, a, emu_smem, 2);
  }
  return e;
}

// Launch the kernels on `stream` (`between`, if not null, is recorded between the wy and the state kernel).
// Requires the workspace carved (gdn_fwd_workspace_carve) and gdn_fwd_mma_refusal(a, variant) null; returns
// cudaErrorInvalidValue otherwise (or for a vt other than 0, 16, 32, 64; rungs 1 and 2: other than 0, 64), else
// the first launch error. a.HV = 0 is taken as H. vt: rung 3's state slice width, 0 = gdn_fwd_slice_width with
// the device's multiprocessor count; o and ht are bitwise the same at every width. a.segs (set before sizing and
// carving the workspace, with a.seg_len): rung 3's split-sequence state pass, segments by length (segments.cuh; 1:
// unsplit; the rule is gdn_fwd_split_plan, glr's dispatch applies it), its results again bitwise the same at every width.
inline cudaError_t gdn_fwd_mma(GdnFwdArgs a, cudaStream_t stream, GdnFwdVariant variant = GdnFwdVariant::t_only,
                               cudaEvent_t between = nullptr, int vt = 0) {
  if (a.HV == 0) a.HV = a.H;
  if (gdn_fwd_mma_refusal(a, variant) != nullptr) return cudaErrorInvalidValue;
  if (vt != 0 && vt != 16 && vt != 32 && vt != 64) return cudaErrorInvalidValue;
  if (variant != GdnFwdVariant::t_only && vt != 0 && vt != 64) return cudaErrorInvalidValue;
  if (vt == 0) vt = variant == GdnFwdVariant::t_only ? gdn_fwd_slice_width(a, state_slice_sms()) : 64;
  switch (variant) {
#if defined(GLR_SM90_HOST_EMU)
    case GdnFwdVariant::p_in_workspace:  // the emulated library runs rung 3 only, what glr's dispatch launches
    case GdnFwdVariant::p_in_registers: return cudaErrorInvalidValue;
#else
    case GdnFwdVariant::p_in_workspace: return gdn_fwd_mma_launch<1, true, 128>(a, stream, between, vt);
    case GdnFwdVariant::p_in_registers: return gdn_fwd_mma_launch<2, true, 128>(a, stream, between, vt);
#endif
    case GdnFwdVariant::t_only:
      if (a.D == 64)
        return a.delta ? gdn_fwd_mma_launch<3, true, 64>(a, stream, between, vt)
                       : gdn_fwd_mma_launch<3, false, 64>(a, stream, between, vt);
      return a.delta ? gdn_fwd_mma_launch<3, true, 128>(a, stream, between, vt)
                     : gdn_fwd_mma_launch<3, false, 128>(a, stream, between, vt);
  }
  return cudaErrorInvalidValue;
}
#endif  // __CUDACC__ || GLR_SM90_EMU_LAUNCHERS

}  // namespace glr::cuda::sm90
