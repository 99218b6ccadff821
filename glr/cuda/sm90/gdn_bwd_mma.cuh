// glr/cuda/sm90/gdn_bwd_mma.cuh: Gated DeltaNet backward on the tensor cores (issue 16 item 1, backward slice).
//
// bf16 q, k, v, do; g (log-decay per token and head) and beta fp32 or bf16, each on its own (g_bf16, beta_bf16:
// flash-linear-attention passes bf16 beta with fp32 g); K = V = 128 or 64 (GdnBwdArgs::D, the kernels' template
// parameter kD: at 64 each warp holds one 16-row tile of the state slice and the chunk kernel's phase 2 one 64-column
// part of K); chunk C = 64; fp32 accumulation (mma.sync
// m16n8k16 bf16 -> fp32). Dense layouts as the forward (gdn_fwd_mma.cuh): q, k, v, do, dq, dk, dv (B, T, H, K)
// bf16; g, beta, dg, dbeta (B, T, H), dg in g's dtype and dbeta in beta's (the bf16 ones rounded once, to nearest
// even, from the fp32 result); h0, dht, dh0 (B, H, K, V) fp32, optional. Only the wy kernel reads g and beta (into
// the fp32 G and Bc of the workspace) and only the chunk kernel's phase 3 writes dg and dbeta: the dtypes change
// nothing else, so dq, dk, dv, dh0 of bf16 g / beta equal bit for bit those of fp32 g / beta holding the same values.
// DeltaNet is the special case g = 0 (gate = 0: no g is read, G = 0 throughout, no dg is written).
// The members without the delta rule (GdnBwdArgs::delta false: Mamba2, gate 1; RetNet, gate 2, one g per value head;
// linear attention, gate 0) run the kDelta = false instantiations of the h, dh and chunk kernels: the algebra below
// with T = I and V_new = X = V (no K h, no beta, no dbeta; every term through W, L or beta skipped by if constexpr,
// never multiplied by a zero); RetNet's dg is the sum of every token's dg_t (chunk kernel: per chunk, in the dbv
// words; dg_head_kernel: over the chunks, fixed order).
// Grouped value heads (GVA): HV value heads, a multiple of H; value head hv reads q/k head hv / (HV / H), and every
// per-head tensor but q, k, dq, dk has HV heads (v, do, dv (B, T, HV, V); g, beta, dg, dbeta (B, T, HV); the
// states (B, HV, K, V); the workspace per value head). With HV > H the chunk kernel leaves each value head's dq and
// dk in fp32 (dqp, dkp) and a group's HV / H of them are summed in ascending value-head order, as the block
// programs' group_reduce (glr/cuda/common/stages/group_reduce.hpp), rounding once to bf16: by the last of the group's
// chunk-kernel blocks to finish (group_sum_last; chunk_wgmma_kernel and chunk_kernel; the default), or by the separate
// group kernel (GLR_BWD_GROUP_KERNEL=1, and always behind chunk_tma_kernel and fused_bwd_kernel), the same words.
// HV = H: unchanged.
// Packed sequences (cu_seqlens, B = 1, N sequences of any length, 0 included; h0, dht, dh0 (N, HV, K, V)): the
// forward's chunk table and chunk-slot numbering (gdn::sequence, gdn::slot), so chunks never cross a sequence, the
// h and dh kernels walk each sequence's chunks (grid rows sequences x HV) and every packed sequence's outputs are
// bit for bit those of the same sequence run alone as a dense B = 1 batch at the same slice width (vt); invalid
// offsets: every output NaN.
//
// Per chunk (G = in-chunk cumsum of g, Gamma_ij = e^{G_i - G_j}, T = (I + L)^-1 as in the forward, h the state
// entering the chunk, dh' the gradient of the state leaving it), with X = beta V - beta e^G (K h), V_new = T X.
// Every decay between two tokens (Gamma, T's L, e^{G_L - G}) is formed as e^{Gr_i - Gr_j}, Gr_i = g_1 + ... + g_i
// (the workspace's Gr, from the wy kernel), never from G differences: a NaN or +Inf first gate g_0 of a chunk only
// decays the state entering it, and G_i - G_j would be NaN - NaN (docs/glr-math.md section 7: the exact dv of a
// sequence's first chunk does not depend on g_0). G itself only in e^{G_i} and e^{G_L}, the decays of h.
//   dV_new = P^T dO + e^{G_L - G} . (K dh')          P = scale tril(Gamma . Q K^T)
//   dX     = T^T dV_new,   dv = beta . dX
//   dh     = e^{G_L} dh' + Q^T (scale e^G . dO) - K^T (beta e^G . dX)
//   dL     = -dX V_new^T (strictly lower part)  -- the gradient through T = (I + L)^-1 needs no T
//   dq     = scale e^G . (dO h^T) + dA K,           dA = scale tril(Gamma . (dO V_new^T))
//   dk     = -beta e^G . (dX h^T) + e^{G_L - G} . (V_new dh'^T) + E K + E^T K + dA^T Q,   E = beta . Gamma . dL
//   dbeta  = rowsum(dX . V) - e^G . rowsum(K . (dX h^T)) + rowsum(Gamma . K K^T . dL)
//   dG     = scale e^G rowsum(Q . dO h^T) - beta e^G rowsum(K . dX h^T) - e^{G_L - G} rowsum(K . V_new dh'^T)
//            + rowsum(M) - colsum(M),  M = dP . P + dL . L;   dG_L += sum_i e^{G_L - G_i} (...)_i + e^{G_L} <h, dh'>
//   dg     = reverse cumulative sum of dG within the chunk; formed without the pairs that cancel exactly (M's
//            diagonal; t3_i = e^{G_L - G_i} (...)_i, which reaches dg_j only for j > i: dg_j = revcumsum of the
//            rest + t3_0 + ... + t3_{j-1}), so a NaN or Inf of v_i stays out of dg_j, j <= i, as in the exact dg
// (derivation: bench/glr/sm90_bwd_notes.md; float64 check: tests/glr_sm90/bwd_formulas_check.py).
//
// Four kernels:
//   wy   (gdn_fwd_mma.cuh's rung-3 kernel): T, G, beta, Gr per chunk to the workspace (when the forward saved T
//        and G, gdn_bwd_use_saved, GdnBwdArgs::wy_saved: wy_scalars_kernel instead, beta and Gr alone).
//   h    (per head and 64, 32 or 16 state columns, chunks in order): h_c (bf16) and V_new (bf16, and its bf16
//        residual) to the workspace (GLR_H_WGMMA=1: on wgmma at 64 columns, state_t_wgmma_kernel's h mode).
//   dh   (per head and 64, 32 or 16 state columns, chunks last to first): dh_{c+1} (bf16, and its bf16 residual)
//        and dX (bf16) to the workspace, dv, dh0, and dbeta's rowsum(dX . V) per column slice.
//   chunk (per chunk and head): dq, dk, dg, dbeta.
// No atomics: every sum is a fixed sequence of mma/FMA, so results are bitwise deterministic run to run.
#pragma once

#include <type_traits>

#include "gdn_fwd_mma.cuh"

namespace glr::cuda::sm90 {

struct GdnBwdArgs {
  const __nv_bfloat16* q = nullptr;     // (B, T, H, K)
  const __nv_bfloat16* k = nullptr;     // (B, T, H, K)
  const __nv_bfloat16* v = nullptr;     // (B, T, H, V)
  const void* g = nullptr;              // (B, T, H) fp32, or bf16 with g_bf16
  const void* beta = nullptr;           // (B, T, H) fp32, or bf16 with beta_bf16
  const float* h0 = nullptr;            // (B, H, K, V) or null
  const __nv_bfloat16* dout = nullptr;  // (B, T, H, V)
  const float* dht = nullptr;           // (B, H, K, V) or null
  __nv_bfloat16* dq = nullptr;          // (B, T, H, K)
  __nv_bfloat16* dk = nullptr;          // (B, T, H, K)
  __nv_bfloat16* dv = nullptr;          // (B, T, H, V)
  void* dg = nullptr;                   // (B, T, H) in g's dtype
  void* dbeta = nullptr;                // (B, T, H) in beta's dtype
  float* dh0 = nullptr;                 // (B, H, K, V) or null
  int B = 0, T = 0, H = 0;
  int D = gdn::DK;  // K = V, the head dims: 128 or 64 (the kernels' template parameter kD, chosen by gdn_bwd_mma)
  float scale = 0.f;
  int gate = 1;  // 1: g per token and value head; 2: one g per value head (RetNet: g, dg (HV)); 0: g = 0, g and dg
                 // unused, may be null
  // The family member's other switch (glr/params.hpp): the delta rule (Gated DeltaNet, DeltaNet) or not (Mamba2:
  // gate 1, RetNet: gate 2, linear attention: gate 0). Without it V_new = X = V (T = I, no K h): no beta, no dbeta
  // (may be null), and the kernels' kDelta = false instantiations skip every term of W, L and beta.
  bool delta = true;
  bool g_bf16 = false;     // g and dg bf16 (else fp32)
  bool beta_bf16 = false;  // beta and dbeta bf16 (else fp32)
  int vt = 64;  // state columns per block of the h and dh kernels (64, 32 or 16); set by gdn_bwd_mma
  int HV = 0;   // value heads (GVA, see above), a multiple of H; 0 means H
  __host__ __device__ int value_heads() const { return HV > 0 ? HV : H; }
  // Packed sequences (B = 1), as the forward's GdnFwdArgs: N + 1 offsets on the device, int64 or int32 (one of
  // them), N >= 1; h0, dht, dh0 then (N, HV, K, V). The forward's chunk table kernel checks them on the device and
  // builds the table: invalid offsets make status 1 and every output NaN (the poison kernel).
  const std::int64_t* cu_seqlens = nullptr;
  const std::int32_t* cu_seqlens32 = nullptr;
  int N = 0;
  __host__ __device__ bool varlen() const { return N > 0; }
  __host__ __device__ int num_seqs() const { return varlen() ? N : B; }
  // Chunks per value head: dense B NT; packed ceil(T / 64) + N, an upper bound (each sequence adds at most one
  // partial chunk), the forward's chunk_slots.
  __host__ __device__ long long chunk_slots() const {
    const long long nt = (static_cast<long long>(T) + 63) / 64;
    return varlen() ? nt + N : nt * B;
  }
  std::int32_t* status = nullptr;  // packed only: the status word the chunk table kernel writes (0, or 1: invalid)
  std::int32_t* table = nullptr;   // packed only: the forward's chunk table (gdn::kFirst), carved with the workspace
  // workspace, carved by gdn_bwd_workspace_carve (laid out by gdn_bwd_workspace_layout). Per chunk slot (the
  // forward's numbering, gdn::slot: chunk c of sequence n and value head hv is slot first_chunk(n) HV + hv nch(n) + c;
  // dense (b HV + hv) NT + c), S slots in all (chunk_slots() HV); a sequence-and-head's chunks are consecutive slots.
  // Without the delta rule Tm, Bc, vn, vnl and dx are null (not carved), and dbv too unless gate 2. Where the fused
  // sweep takes the backward (chunk_inputs_stored false, below) the chunk kernels' inputs dbv, dhc, vn, dx, vnl,
  // dhcl and qkt are null too.
  __nv_bfloat16* Tm = nullptr;  // (S, C, C) T = (I + L)^-1
  float* G = nullptr;           // (S, C)
  float* Bc = nullptr;          // (S, C) beta, padded with 0
  float* Gr = nullptr;          // (S, C) G without the chunk's first gate: Gr_i = g_1 + ... + g_i
  __nv_bfloat16* hc = nullptr;  // (S, K, V) state entering chunk c
  __nv_bfloat16* dhc = nullptr; // (S, K, V) gradient of the state leaving chunk c
  __nv_bfloat16* dhcl = nullptr;// (S, K, V) its bf16 residual (dh' - dhc; see h_kernel's phase B)
  __nv_bfloat16* vn = nullptr;  // (S, C, V) V_new (the h pass's; carved and written where vnew_stored(a), below)
  __nv_bfloat16* vnl = nullptr; // (S, C, V) V_new - vn, the residual of its bf16 rounding (see h_kernel); likewise
  __nv_bfloat16* dx = nullptr;  // (S, C, V) dX
  float* dbv = nullptr;         // rowsum(dX . V) per column slice (room for 8 slices): a sequence-and-head's
                                // (DV / vt, nch C) block from (DV / vt) C times its first slot (dense (B, H, DV / vt, Tp));
                                // without the delta rule and gate 2: each chunk slot's share of dg (S floats)
  float* dqp = nullptr;         // (B, T, HV, K) fp32 dq of each value head (HV > H only; else unused)
  float* dkp = nullptr;         // (B, T, HV, K) fp32 dk of each value head (HV > H only; else unused)
  // (chunk_slots(), H) arrival tickets, one per (chunk of the batch, q/k head) tile (HV > H only; carved with the
  // workspace, zeroed by launch_all before the chunk kernel that uses them): set in the chunk kernel's arguments only
  // when that kernel sums the group's dq, dk itself (group_sum_last), else null and group_kernel runs.
  std::uint32_t* qkt = nullptr;
  // The split-sequence state passes (few, long sequences; gdn_bwd_split_plan picks segs, seg_len and dh_split;
  // segs = 1: not split; see launch_state_passes): segments cut by length as the forward's (GdnFwdArgs::segs and
  // seg_len, segments.cuh: a sequence of nch chunks in max(1, min(segs, floor(nch / seg_len))) balanced segments),
  // the h and dh kernels' grid rows segments.cuh's (segment rows, or Es slots for the dh pass A', times HV + hv).
  // Per Es slot q (segment j < nseg - 1 of a sequence with nseg > 1) and value head hv a (K, V) fp32 state at
  // (q HV + hv) K V of Es and Ms (set by gdn_bwd_workspace_carve when split; the forward's numbering, so wy_args
  // hands them to its passes A and B):
  //   Es slot of segment j: the state entering segment j + 1 (the forward's pass A and combine_kernel), read by the
  //     h kernel; then (the dh pass, dh_split) the gradient leaving segment j: pass A' leaves there the gradient
  //     entering segment j + 1 from 0 (the last segment from dht), the reverse combine turns it into the whole one,
  //     pass C (or the fused sweep, gdn_bwd_fused.cuh) starts from it;
  //   Ms slot of segment j: M_j, its K x K state map (the forward's pass A, delta rule only; j >= 1): the dh pass
  //     uses its transpose.
  // dh_split false: only the h pass is split (Es, Ms as above), the dh pass runs unsplit (launch_state_passes: where
  // dh_kernel's split pass does not beat dh_wgmma_kernel unsplit).
  int segs = 1;
  int seg_len = 1;
  bool dh_split = true;
  bool dh_ends = false;       // the dh kernel's pass A': grid rows are Es slots, each runs the segment after its own
  bool dh_skip_last = false;  // the dh kernel's pass C: the last segment of a split sequence is pass A''s
  float* Es = nullptr;
  float* Ms = nullptr;
  std::int32_t* segtab = nullptr;  // packed sequences, split: the segment table (segments.cuh)
  // Tm, G (and for packed sequences the chunk table) already hold the wy kernel's outputs, the forward's saved ones
  // (gdn_bwd_use_saved): launch_all skips the chunk table and wy kernels, runs wy_scalars_kernel for Bc and Gr
  // (the workspace's) and copies the saved verdict
  // (table[0]) into the status word. The kernels only read those pieces, so the saved block serves any number of
  // backward calls.
  bool wy_saved = false;
  // The caller will run a kernel that reads the chunk kernels' inputs (vn, vnl, dx, dhc, dhcl, dbv, qkt) itself,
  // or a pass that writes them, whatever the switches say (chunk_inputs_stored): the emulator's runs of the chunk
  // kernels beside the fused sweep (its fused subset), its h pass's and dh pass's word checks, sm90_bwd_check's
  // check_h_pass.
  bool chunk_inputs_kept = false;
};

// Whether the fused reverse sweep (gdn_bwd_fused.cuh: fused_bwd_takes, launch_fused_bwd) takes a backward of a's
// head dims and member: GLR_FUSED_BWD=1, K = V = 128 with the delta rule, split or not (split: the dh pass's pass A'
// and reverse combine, then the sweep over every segment; the workspace keeps Es and Ms). a's sizes and member set.
// Its TMA maps address rows in int32 (fused_bwd_args): a backward whose state rows (chunk slots x HV x K) or token
// rows (B T, plus a chunk) would pass that stays on the separate kernels (not at any size whose workspace fits).
inline bool fused_sweep_takes(const GdnBwdArgs& a) {
  const long long state_rows = static_cast<long long>(a.chunk_slots()) * a.value_heads() * a.D;
  const long long token_rows = static_cast<long long>(a.B) * a.T + gdn::C;
  return a.D == 128 && a.delta && state_rows <= 0x7fffffffLL && token_rows <= 0x7fffffffLL && bwd_fused();
}

// The one rule for the chunk kernels' inputs in the workspace: V_new and its residual (vn, vnl: the h pass's), dX,
// dh' and its bf16 residual, the dbeta partials (dx, dhc, dhcl, dbv: the dh pass's) and the group sums' arrival
// tickets (qkt). The workspace carves them, and the h and dh passes store them, only where a kernel that reads them
// runs: the chunk kernels (chunk_wgmma_kernel, the default; chunk_tma_kernel, GLR_BWD_CHUNK_TMA=1; chunk_kernel,
// GLR_BWD_WGMMA=0), i.e. wherever the fused sweep does not take the backward, or a caller's own
// (a.chunk_inputs_kept). The fused sweep (gdn_bwd_fused.cuh) forms V_new, its residual, dX, dh', dh''s residual and
// the dbeta partials itself in shared memory and sums no group in-kernel (group_kernel does), so under it (null) the
// h pass stores no V_new, no dh pass runs but the split pass's pass A' in its Es-only mode (launch_fused_bwd: it
// stores the Es slots alone), and the workspace holds what the sweep reads: T, G, beta, Gr, h_c, Es, Ms, the chunk
// table, the segment table, and with GVA dq and dk of each value head (dqp, dkp: the sweep stores them, group_kernel
// sums them). At K = V = 128 that is 32 KB (V_new) + 16 KB (dX) + 64 KB (dh', its residual) + 2 KB (dbeta) a
// chunk-head neither written nor carved. Members without the delta rule never take the sweep.
inline bool chunk_inputs_stored(const GdnBwdArgs& a) { return a.chunk_inputs_kept || !fused_sweep_takes(a); }
// V_new's pieces (vn, vnl): the delta rule's only (h_kernel, the wgmma h pass store them where this holds).
inline bool vnew_stored(const GdnBwdArgs& a) { return a.delta && chunk_inputs_stored(a); }

// The workspace's layout, its one description: each piece's byte offset from the (16-byte aligned) base, in carving
// order, for a's sizes (B, T, H, HV, N, D), member (delta, gate) and segs; kAbsent for a piece the member does not use.
// Every piece starts at a multiple of 256 bytes. gdn_bwd_workspace_bytes is its end, gdn_bwd_workspace_carve sets
// the pointers from it. At B8 T4096 H16 K = V = 128 with the delta rule 1298 MB (T 67; h, dh' and dh''s residual 268
// each; V_new, its residual and dX 134 each; G, beta, Gr 2.1 each; the dbeta partials 16.8), 342 MB where the fused
// sweep takes it (T, G, beta, Gr and h alone: no dh', its residual, V_new, its residual, dX or dbeta partials,
// chunk_inputs_stored; B4 T8192 H32 2596 and 684 MB); without the delta rule (Mamba2,
// RetNet, linear attention: no T, beta, V_new, its residual, dX or dbeta partials) 809.5 MB, RetNet 32 KB more (one
// dg share per chunk slot). All per value head; with HV > H (GVA) also dq and dk of each value head in fp32 (2 B T HV
// K 4 bytes: at B1 T32768 H16 HV32 1074 MB of the 3670 MB, of the 1757 MB under the fused sweep) and the chunk
// kernels' group sums' arrival tickets (chunk_slots() H uint32: 32 KB there; not under the fused sweep). (These
// figures: gdn_bwd_workspace_layout at those sizes, with and without GLR_FUSED_BWD=1; bench/glr/sm90_bwd_notes.md,
// "The fused path's workspace and pass A'".) Packed sequences (N > 0, B = 1): the per-chunk pieces
// for ceil(T / 64) + N chunks per value head (the chunk slots' upper bound), and the chunk table at the end. The
// split state passes (seg::split(a): set a.segs and a.seg_len before asking) add Es and, with the delta rule, Ms:
// seg::slots HV K V fp32 each (B1 T32768 H16 K = V = 128 in 8 segments: 7.3 MB each, of 1313 MB, 357 under the
// fused sweep), and for packed
// sequences the segment table (3 (N + 1) int32).
struct GdnBwdLayout {
  static constexpr std::size_t kAbsent = ~std::size_t{0};
  std::size_t Tm, G, Bc, Gr, dbv, hc, dhc, vn, dx, vnl, dhcl, dqp, dkp, qkt, table, Es, Ms, segtab;
  std::size_t end;  // the workspace's bytes
  // The bytes from offset `at` (a present piece's) to the next piece or the end: the piece's size rounded up to 256
  // (what a check of a piece's bytes scans, without restating the sizes above).
  std::size_t extent(std::size_t at) const {
    std::size_t next = end;
    for (std::size_t o : {Tm, G, Bc, Gr, dbv, hc, dhc, vn, dx, vnl, dhcl, dqp, dkp, qkt, table, Es, Ms, segtab})
      if (o != kAbsent && o > at && o < next) next = o;
    return next - at;
  }
};
inline GdnBwdLayout gdn_bwd_workspace_layout(const GdnBwdArgs& a) {
  const std::size_t S = static_cast<std::size_t>(a.chunk_slots()) * a.value_heads();  // chunk slots
  const std::size_t rows = static_cast<std::size_t>(a.B) * a.T * a.value_heads();  // token rows of the value heads
  const std::size_t d = static_cast<std::size_t>(a.D), C = gdn::C;                  // K = V
  const bool delta = a.delta, gva = a.value_heads() > a.H;
  std::size_t at = 0;
  auto piece = [&at](bool used, std::size_t bytes) {
    if (!used) return GdnBwdLayout::kAbsent;
    const std::size_t o = at;
    at += (bytes + 255) / 256 * 256;
    return o;
  };
  GdnBwdLayout l;
  l.Tm = piece(delta, S * C * C * 2);
  l.G = piece(true, S * C * 4);
  l.Bc = piece(delta, S * C * 4);
  l.Gr = piece(true, S * C * 4);
  // with the delta rule the dbeta partials (8 column slices); without it RetNet's dg share per chunk slot
  const bool chunk_in = chunk_inputs_stored(a);  // the chunk kernels' inputs (the rule above)
  l.dbv = piece((delta || a.gate == 2) && chunk_in, delta ? S * C * 4 * 8 : S * 4);
  l.hc = piece(true, S * d * d * 2);
  l.dhc = piece(chunk_in, S * d * d * 2);
  l.vn = piece(vnew_stored(a), S * C * d * 2);
  l.dx = piece(delta && chunk_in, S * C * d * 2);
  l.vnl = piece(vnew_stored(a), S * C * d * 2);
  l.dhcl = piece(chunk_in, S * d * d * 2);
  l.dqp = piece(gva, rows * d * 4);  // the fp32 dq and dk of each value head, for the group kernel
  l.dkp = piece(gva, rows * d * 4);
  // the arrival tickets of the chunk kernels' in-kernel group sums (4 bytes a (chunk, q/k head): B1 T32768 H16 32 KB)
  l.qkt = piece(gva && chunk_in, static_cast<std::size_t>(a.chunk_slots()) * a.H * 4);
  l.table = piece(a.varlen(), 4 * (2 + static_cast<std::size_t>(a.N) + 1 + static_cast<std::size_t>(a.chunk_slots())));
  const bool split = seg::split(a);
  const std::size_t split_states = split ? static_cast<std::size_t>(seg::slots(a)) * a.value_heads() * d * d : 0;
  l.Es = piece(split, split_states * 4);
  l.Ms = piece(split && delta, split_states * 4);  // without the delta rule M_s is a scalar (combine_kernel)
  l.segtab = piece(seg::table_words(a) > 0, 4 * static_cast<std::size_t>(seg::table_words(a)));
  l.end = at;
  return l;
}
inline std::size_t gdn_bwd_workspace_bytes(const GdnBwdArgs& a) { return gdn_bwd_workspace_layout(a).end; }
// The same from the sizes and the member alone (HV = 0 means H; N > 0 packed sequences, B = 1).
inline std::size_t gdn_bwd_workspace_bytes(int B, int T, int H, int HV = 0, int N = 0, int D = gdn::DK,
                                           bool delta = true, int gate = 1, int segs = 1) {
  GdnBwdArgs a;
  a.B = B;
  a.T = T;
  a.H = H;
  a.HV = HV;
  a.N = N;
  a.D = D;
  a.delta = delta;
  a.gate = gate;
  a.segs = segs;
  return gdn_bwd_workspace_bytes(a);
}
// Every piece starts 16-byte aligned when ws is. a's sizes (B, T, H, HV, N, D), member (delta, gate) and segs must be set.
inline void gdn_bwd_workspace_carve(GdnBwdArgs& a, void* ws) {
  const GdnBwdLayout l = gdn_bwd_workspace_layout(a);
  char* const base = static_cast<char*>(ws);
  auto at = [base](std::size_t o) -> void* { return o == GdnBwdLayout::kAbsent ? nullptr : base + o; };
  a.Tm = static_cast<__nv_bfloat16*>(at(l.Tm));
  a.G = static_cast<float*>(at(l.G));
  a.Bc = static_cast<float*>(at(l.Bc));
  a.Gr = static_cast<float*>(at(l.Gr));
  a.dbv = static_cast<float*>(at(l.dbv));
  a.hc = static_cast<__nv_bfloat16*>(at(l.hc));
  a.dhc = static_cast<__nv_bfloat16*>(at(l.dhc));
  a.vn = static_cast<__nv_bfloat16*>(at(l.vn));
  a.dx = static_cast<__nv_bfloat16*>(at(l.dx));
  a.vnl = static_cast<__nv_bfloat16*>(at(l.vnl));
  a.dhcl = static_cast<__nv_bfloat16*>(at(l.dhcl));
  a.dqp = static_cast<float*>(at(l.dqp));
  a.dkp = static_cast<float*>(at(l.dkp));
  a.qkt = static_cast<std::uint32_t*>(at(l.qkt));
  a.table = static_cast<std::int32_t*>(at(l.table));  // the chunk table (packed sequences)
  a.Es = static_cast<float*>(at(l.Es));
  a.Ms = static_cast<float*>(at(l.Ms));
  a.segtab = static_cast<std::int32_t*>(at(l.segtab));
}

namespace gdn_bwd {
inline GdnFwdArgs wy_args(const GdnBwdArgs& a);
}
// Reads the wy kernel's T and G from `saved` (gdn_wy_saved_carve's block, filled by the forward's wy kernel for the
// same sizes, member, dtypes and inputs) instead of computing them: Tm, G and the chunk table point there, wy_saved
// set; Bc and Gr stay in the workspace, where launch_all's wy_scalars_kernel writes them from beta and g. The outputs
// are then word for word those of the backward that runs its own wy kernel (the same kernel on the same inputs wrote
// T and G; beta and Gr are the same operations on the same inputs). a carved (gdn_bwd_workspace_carve); its Tm and G
// pieces go unused.
inline void gdn_bwd_use_saved(GdnBwdArgs& a, void* saved) {
  GdnFwdArgs f = gdn_bwd::wy_args(a);
  gdn_wy_saved_carve(f, saved);
  a.Tm = a.delta ? f.P : nullptr;
  a.G = f.G;
  if (a.varlen()) a.table = f.table;
  a.wy_saved = true;
}

namespace gdn_bwd {

using namespace gdn;

// The forward's rung-3 wy kernel fills T, G and beta of this backward's workspace (dense batches or packed
// sequences, HV value heads, Gated DeltaNet or DeltaNet), and for packed sequences its chunk table kernel checks the
// offsets and builds the table; with a.segs > 1 its split state pass's passes A and B (state_t_kernel<.., true> on
// v and h0, combine_kernel) fill Es and Ms, and the reverse combine runs on them: their arguments. GdnFwdArgs gains fields as the forward grows (value heads HV, the
// member, packed sequences); those left at their defaults mean Gated DeltaNet on a dense batch, and HV is set where
// it exists.
template <class FwdArgs>
inline void set_value_heads(FwdArgs& f, int H) {
  if constexpr (requires { f.HV; }) f.HV = H;
}
inline GdnFwdArgs wy_args(const GdnBwdArgs& a) {
  GdnFwdArgs f;
  f.k = a.k;
  f.g = a.gate == 0 ? nullptr : a.g;
  f.gate = a.gate;  // 0: the wy kernel reads no g and leaves G = 0; 2: g[hv] at every token
  f.delta = a.delta;  // without the delta rule the wy kernel writes G and Gr only (no T, no beta)
  f.beta = a.delta ? a.beta : nullptr;
  f.g_bf16 = a.g_bf16;  // the wy kernel widens bf16 g and beta to the fp32 G and Bc (load_scalar)
  f.beta_bf16 = a.beta_bf16;
  f.B = a.B;
  f.T = a.T;
  f.H = a.H;
  set_value_heads(f, a.value_heads());
  f.cu_seqlens = a.cu_seqlens;  // packed sequences: the same offsets, table and status word (the chunk slots of
  f.cu_seqlens32 = a.cu_seqlens32;  // f and a are one numbering)
  f.N = a.N;
  f.status = a.status;
  f.table = a.table;
  f.P = a.Tm;
  f.G = a.G;
  f.Bc = a.Bc;
  f.Gr = a.Gr;  // the wy kernel writes Gr too and forms T's decays from it
  f.D = a.D;
  f.v = a.v;  // the split pass's pass A: the segments' end states from v (and h0), M_s
  f.h0 = a.h0;
  f.segs = a.segs;
  f.seg_len = a.seg_len;
  f.Es = a.Es;
  f.Ms = a.Ms;
  f.segtab = a.segtab;
  return f;
}

// Sequences and chunk slots, as the forward's gdn::sequence, gdn::slot and gdn::wy_chunk (one numbering: the wy kernel
// writes T, G and beta by it): sequence n holds flat tokens begin .. begin + len - 1 and chunks first .. first +
// nch - 1 (dense: n T, T, n NT, NT; packed: cu_seqlens and the chunk table); value head hv's chunks of it are the
// consecutive slots from first HV + hv nch (dense (n HV + hv) NT). Every kernel indexes its tokens and workspace rows
// through these, so a packed sequence's chunks see the same tokens, padding and slot-relative rows as the same
// sequence alone in a dense B = 1 batch.
__device__ __forceinline__ Seq sequence(const GdnBwdArgs& a, int n) {
  if (!a.varlen()) {
    const int nt = (a.T + C - 1) / C;
    return {static_cast<std::int64_t>(n) * a.T, a.T, n * nt, nt};
  }
  auto off = [&](int i) { return a.cu_seqlens ? a.cu_seqlens[i] : static_cast<std::int64_t>(a.cu_seqlens32[i]); };
  const std::int64_t b = off(n), e = off(n + 1);
  const int first = a.table[kFirst + n];
  return {b, static_cast<int>(e - b), first, a.table[kFirst + n + 1] - first};
}
__device__ __forceinline__ std::int64_t first_slot(const GdnBwdArgs& a, const Seq& sq, int hv) {
  return static_cast<std::int64_t>(sq.first) * a.value_heads() + static_cast<std::int64_t>(hv) * sq.nch;
}
// The packed offsets were found invalid (the chunk table kernel's verdict): the kernels do nothing, the poison
// kernel writes NaN to every output. Dense batches: never.
__device__ __forceinline__ bool bad_offsets(const GdnBwdArgs& a) { return a.varlen() && a.table[0] != 0; }
// Block (bx, by) of the chunk kernel's grid: dense (chunk, n HV + hv); packed (chunk of the whole batch, hv), as
// the wy kernel's. False for a grid slot past the last chunk (packed: chunk_slots() columns, an upper bound) and
// for invalid offsets (every chunk_seq entry -1).
__device__ __forceinline__ bool chunk_of(const GdnBwdArgs& a, int bx, int by, Seq& sq, int& hv, int& c) {
  int n;
  if (!a.varlen()) {
    n = by / a.value_heads();
    hv = by % a.value_heads();
  } else {
    n = a.table[kFirst + a.N + 1 + bx];
    if (n < 0) return false;
    hv = by;
  }
  sq = sequence(a, n);
  c = a.varlen() ? bx - sq.first : bx;
  return true;
}

// Block (slice, s (sequences HV) + n HV + hv) of the h and dh kernels (grid (kD / kVT, segments x sequences x HV);
// unsplit one segment): sequence n (dense: batch row n), value head hv, q/k head hv / (HV / H), state columns v0 ..
// v0 + kVT - 1, segment s (its chunks c_begin .. c_end - 1; the dh kernel's pass A' counts its rows from segment 1),
// and where its tokens, chunk slots and states lie. False for invalid packed offsets (then nothing else is set: the
// poison kernel writes every output). kSplit false (dh_wgmma_kernel, launched unsplit only): the grid is one
// segment, blockIdx.y = n HV + hv, and no segment arithmetic is emitted (at 255 registers every instruction counts).
struct StateBlock {
  int HV, v0, bh, n, hv, h;
  int seg, nseg, c_begin, c_end;  // the segment of the sequence's nseg and its chunks (unsplit: 0, 1, 0, nch)
  std::int64_t soff;        // the slice's offset in Es / Ms at the sequence's Es slot 0 (split only)
  std::int64_t slot_states; // one Es / Ms slot: HV K V
  Seq sq;
  std::int64_t R;           // the slot of the sequence's chunk 0 for this value head
  std::int64_t row_stride;  // q/k token stride, H K
  std::int64_t tokb;        // q/k token (begin, h)
  std::int64_t vtokb;       // v/do/dv token (begin, hv)
  std::int64_t hoff;        // h0, dht, dh0 (sequence n, hv), column v0
  const __nv_bfloat16* Tw;  // T of chunk slot R (null without the delta rule)
  const float *Gg, *Grg, *Bg;  // G, Gr (laid out as G), beta of chunk slot R (beta: null without the delta rule)
};
template <int kVT, int kD, bool kDelta, bool kSplit = false>
__device__ __forceinline__ bool state_block(const GdnBwdArgs& a, StateBlock& b) {
  b.HV = a.value_heads();
  b.v0 = blockIdx.x * kVT;
  b.seg = 0;
  b.nseg = 1;
  b.soff = 0;
  b.slot_states = static_cast<std::int64_t>(b.HV) * kD * kD;
  if constexpr (kSplit) {  // segments.cuh's rows: Es slots in the dh pass A' (the segment after), else segment rows
    b.hv = static_cast<int>(blockIdx.y) % b.HV;
    if (bad_offsets(a)) return false;
    seg::Pos p;
    if (!seg::pos(a, a.dh_ends ? seg::kSlot : seg::kRow, static_cast<int>(blockIdx.y) / b.HV, p)) return false;
    b.seg = p.j + (a.dh_ends ? 1 : 0);
    b.nseg = p.nseg;
    if (a.dh_skip_last && p.nseg > 1 && b.seg == p.nseg - 1) return false;  // pass A' ran it from dht
    b.n = p.n;
    b.bh = b.n * b.HV + b.hv;
    b.soff = (static_cast<std::int64_t>(p.slot0) * b.HV + b.hv) * kD * kD + b.v0;
  } else {
    b.bh = static_cast<int>(blockIdx.y);
    b.n = b.bh / b.HV;
    b.hv = b.bh % b.HV;
  }
  b.h = b.hv / (b.HV / a.H);
  if (bad_offsets(a)) return false;
  b.sq = sequence(a, b.n);
  b.c_begin = kSplit ? seg::begin(b.seg, b.nseg, b.sq.nch) : 0;
  b.c_end = kSplit ? seg::begin(b.seg + 1, b.nseg, b.sq.nch) : b.sq.nch;
  b.R = first_slot(a, b.sq, b.hv);
  b.row_stride = static_cast<std::int64_t>(a.H) * kD;
  b.tokb = b.sq.begin * a.H + b.h;
  b.vtokb = b.sq.begin * b.HV + b.hv;
  b.Tw = kDelta ? a.Tm + b.R * C * C : nullptr;  // (no T and no beta without the delta rule)
  b.Gg = a.G + b.R * C;
  b.Grg = a.Gr + (b.Gg - a.G);
  b.Bg = kDelta ? a.Bc + b.R * C : nullptr;
  b.hoff = static_cast<std::int64_t>(b.bh) * kD * kD + b.v0;
  return true;
}

// Store x at p[i]: fp32, or with bf16 rounded once to nearest even (dg and dbeta in their inputs' dtype).
__device__ __forceinline__ void store_scalar(void* p, bool bf16, std::int64_t i, float x) {
  if (bf16)
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(x);
  else
    static_cast<float*>(p)[i] = x;
}

// A hint: bring the 128-byte line holding p into L2 (prefetch.global.L2); nothing under the host emulator.
#if !defined(GLR_SM90_HOST_EMU)
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p)); }
#else
inline void prefetch_l2(const void*) {}
#endif

// ---------------------------------------------------------------------------------------------------------
// The h and dh kernels work on a (K x kVT) slice of the state (kVT = 64, 32 or 16 columns, DV / kVT blocks per
// head): narrower slices give more blocks and a shorter chain per chunk where B H is small (B1 T32768 H16: 32
// blocks at kVT 64, 128 at kVT 16), at the price of loading k (and q, T) once per slice.
// (Slice<kVT>: glr/cuda/sm90/state_slice.cuh, shared with the forward's state kernel.)

// Kernel h: the forward's state recurrence again (as gdn::state_t_kernel, without q, P and o), leaving the
// state entering every chunk (bf16, the copy the tensor cores read anyway) and V_new (bf16).
template <int kVT, int kD = gdn::DK>
struct HSmem {
  static constexpr int kLd = kD + 8;         // row stride of the (C x K) tiles
  __nv_bfloat16 k[2][C * kLd];             // (C, K) per buffer (chunk c in buffer c % 2)
  __nv_bfloat16 T[C * LD64];                 // (C, C) (I + L)^-1
  __nv_bfloat16 h[kD * Slice<kVT>::LD];      // (K, kVT) bf16 copy of the state slice
  __nv_bfloat16 x[C * Slice<kVT>::LD];       // (C, kVT) X
  __nv_bfloat16 xl[C * Slice<kVT>::LD];      // (C, kVT) X - bf16(X)
  __nv_bfloat16 vn[C * Slice<kVT>::LD];      // (C, kVT) V_new
  __nv_bfloat16 vnl[C * Slice<kVT>::LD];     // (C, kVT) V_new - bf16(V_new)
  __nv_bfloat16 vnd[C * Slice<kVT>::LD];     // (C, kVT) e^{G_last - G} V_new
  float G[C];
  float Gr[C];
  float beta[C];
  int nonfinite;  // this chunk's X holds a NaN or Inf (phase B then forms its diagonal tile without 0 * NaN)
};
// h_kernel's prefetching schedule (kPrefetch, GLR_H_PREFETCH=1; h_kernel's comment says when each load is issued):
// G, Gr, beta double-buffered (chunk c's in row c % 2: rows 0 are HSmem's own); v of chunk c lands in xl, free from
// phase B's end to the next phase A's epilogue. 780 bytes more: the block still fits twice in an SM.
// The rows of 1 are cp.async destinations (16 bytes, 16-byte aligned): HSmem ends with its int `nonfinite` (sizeof
// HSmem = 4 mod 16), so G1 is aligned explicitly (12 bytes of padding); unaligned, its first cp.async faulted on an
// H100 ("misaligned address", 2026-12-07) and now aborts the emulator (tests/glr_sm90/emu.hpp, "Alignment").
template <int kVT, int kD = gdn::DK>
struct HPipeSmem : HSmem<kVT, kD> {
  alignas(16) float G1[C];
  float Gr1[C];
  float beta1[C];
};
static_assert(2 * (sizeof(HPipeSmem<64, 128>) + 1024) <= 228 * 1024, "the prefetching h_kernel keeps 2 blocks an SM");
static_assert(sizeof(HPipeSmem<64, 128>) % 16 == 0 && sizeof(HPipeSmem<64, 128>) == sizeof(HSmem<64, 128>) + 12 + 3 * C * 4,
              "G1, Gr1, beta1 at 16-byte aligned offsets (sizeof(HSmem) = 4 mod 16; C * 4 = 256)");
// Where the launcher takes it: the delta rule at slices of 64 and 32 columns. At 16 ptxas 13.0 spilled it (4 bytes at
// 72 registers), and 16-column blocks are the many small ones (3 an SM by shared memory), which hide their loads by
// their number.
template <int kVT, int kD, bool kDelta>
inline constexpr bool h_prefetch_takes = kDelta && kVT >= 32;
// Chunk c's rows (and the tiles the epilogues write by name) as h_x_epilogue and h_vnew_epilogue read them: HSmem
// itself in the plain schedule, row c % 2 in the prefetching one.
struct HChunkRows {
  float *G, *Gr, *beta;
  __nv_bfloat16* vnd;
  int& nonfinite;
};
template <int kVT, int kD>
__device__ __forceinline__ HSmem<kVT, kD>& h_chunk_rows(HSmem<kVT, kD>& s, int) {
  return s;
}
template <int kVT, int kD>
__device__ __forceinline__ HChunkRows h_chunk_rows(HPipeSmem<kVT, kD>& s, int c) {
  return c & 1 ? HChunkRows{s.G1, s.Gr1, s.beta1, s.vnd, s.nonfinite} : HChunkRows{s.G, s.Gr, s.beta, s.vnd, s.nonfinite};
}

// Copy a (kRows x kVT) bf16 shared tile (row stride kVT + 8) to global rows of `stride` elements, 16 bytes a piece.
template <int kRows, int kVT>
__device__ __forceinline__ void store_tile(__nv_bfloat16* dst, std::int64_t stride, const __nv_bfloat16* src, int tid) {
  constexpr int kPieces = kVT / 8, kLd = Slice<kVT>::LD;
#pragma unroll
  for (int it = 0; it < kRows * kPieces / kThreads; ++it) {
    const int e = tid + it * kThreads, r = e / kPieces, cc = e % kPieces;
    *reinterpret_cast<uint4*>(dst + r * stride + cc * 8) = *reinterpret_cast<const uint4*>(src + r * kLd + cc * 8);
  }
}

// Prefetch (kPrefetch, GLR_H_PREFETCH=1; h_prefetch_takes: the delta rule at 64 and 32 columns): the same products and epilogues in the same order (the
// same words), the loads moved earlier. The plain schedule loads chunk c + 1's k after phase A and its T, G, Gr, beta
// after phase B, waits for all of them at chunk c's end (phase C and the stores alone hide T, G, Gr, beta), and reads
// chunk c's v rows from global memory into registers at its start (phase A hides them). Here, one cp.async group each:
//   at chunk c's start   k, G, Gr, beta of chunk c + 1 (k's buffer and rows (c + 1) % 2, chunk c - 1's, free since the
//                        last barrier)
//   after phase B's      T of chunk c + 1 (read by phase B only) and its v rows into xl (X's residual, read by phase
//     epilogue barrier   B only; the next phase A's epilogue overwrites it, each thread its own words, after reading
//                        its v words from there)
// waited for where they are needed: at chunk c's end k, G, Gr, beta of chunk c + 1; T and v of chunk c + 1 before a
// barrier after chunk c + 1's phase A (one barrier more a chunk), so phase C, the stores and the next phase A hide them.
// kVnewOut (the delta rule): V_new and its residual stored to a.vn, a.vnl (vnew_stored); false where no kernel reads
// them (a.vn null: the fused sweep's backward, launch_h_pass), a separate instantiation so the default one's code is
// the one with the stores alone.
template <int kVT, int kD = gdn::DK, bool kDelta = true, bool kPrefetch = false, bool kVnewOut = kDelta>
__global__ void __launch_bounds__(kThreads) h_kernel(const __grid_constant__ GdnBwdArgs a) {
  static_assert(kD == 64 || kD == 128, "K = V = 64 or 128");
  static_assert(!kPrefetch || h_prefetch_takes<kVT, kD, kDelta>, "the prefetching schedule: the delta rule, 64 or 32 columns");
  using SL = Slice<kVT>;
  constexpr int NN = SL::NN, NP = SL::NP, LDV = SL::LD;
  constexpr int kLd = kD + 8, MT = kD / 64;  // k's row stride; 16-row tiles of this warp's kD / 4 state rows
  using Smem = std::conditional_t<kPrefetch, HPipeSmem<kVT, kD>, HSmem<kVT, kD>>;
  extern __shared__ __align__(16) char smem_raw[];
  Smem& s = *reinterpret_cast<Smem*>(smem_raw);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g8 = lane >> 2, t4 = lane & 3;
  StateBlock sb;
  if (!state_block<kVT, kD, kDelta, true>(a, sb)) return;  // invalid packed offsets: the poison kernel writes every output
  __nv_bfloat16* hcg = a.hc + sb.R * kD * kD + sb.v0;
  // V_new and its residual to the workspace where a kernel reads them (kVnewOut; V_new = V without the delta rule);
  // else only to the shared tiles phase C reads
  __nv_bfloat16* vng = kVnewOut ? a.vn + sb.R * C * kD + sb.v0 : nullptr;
  __nv_bfloat16* vnlg = kVnewOut ? a.vnl + sb.R * C * kD + sb.v0 : nullptr;
  const int r0 = warp * 16, d0 = warp * (kD / 4);
  auto pair = [](__nv_bfloat16* t, int i, int col) { return reinterpret_cast<std::uint32_t*>(t + i * LDV + col); };

  auto load_k = [&](int c) {
    const int t0 = c * C, len = min(C, sb.sq.len - t0);
    load_tile<kD>(s.k[c & 1], a.k + (sb.tokb + static_cast<std::int64_t>(t0) * a.H) * kD, sb.row_stride, len, tid);
  };
  auto load_T = [&](int c) {
    const __nv_bfloat16* Tc = sb.Tw + static_cast<std::int64_t>(c) * C * C;
#pragma unroll
    for (int it = 0; it < C * 8 / kThreads; ++it) {
      const int e = tid + it * kThreads, r = e >> 3, cc = e & 7;
      cp_async_16(smem_addr(s.T + r * LD64 + cc * 8), Tc + r * C + cc * 8, true);
    }
  };
  auto load_rows = [&](int c) {  // G, beta (delta rule), Gr of chunk c: HSmem's rows, or (prefetching) row c % 2
    decltype(auto) rw = h_chunk_rows(s, kPrefetch ? c : 0);
    if (tid < C / 4) cp_async_16(smem_addr(rw.G + tid * 4), sb.Gg + c * C + tid * 4, true);
    else if (tid < C / 2) {
      if constexpr (kDelta) cp_async_16(smem_addr(rw.beta + (tid - C / 4) * 4), sb.Bg + c * C + (tid - C / 4) * 4, true);
    } else if (tid < 3 * C / 4) {
      cp_async_16(smem_addr(rw.Gr + (tid - C / 2) * 4), sb.Grg + c * C + (tid - C / 2) * 4, true);
    }
  };
  auto load_small = [&](int c) {  // T and beta with the delta rule only (the wy kernel writes neither without it)
    if constexpr (kDelta) load_T(c);
    load_rows(c);
  };
  auto load_v = [&](int c) {  // (prefetching) chunk c's v rows into xl, zeros past the sequence (as the plain vr loads)
    const int t0 = c * C, len = min(C, sb.sq.len - t0);
    load_tile<kVT>(s.xl, a.v + (sb.vtokb + static_cast<std::int64_t>(t0) * sb.HV) * kD + sb.v0,
                   static_cast<std::int64_t>(sb.HV) * kD, len, tid);
  };

  // The state entering the block's segment, at its slice: h0 (or 0) for segment 0, else Es slot of segment s - 1
  // (the split pass's A and B).
  const float* h_in = sb.seg == 0 ? (a.h0 ? a.h0 + sb.hoff : nullptr) : a.Es + sb.soff + (sb.seg - 1) * sb.slot_states;
  float hs[MT][NN][4];  // the state slice: rows d0 + 16 mt + g8 (+8), columns 8 n + 2 t4 (+1)
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int n = 0; n < NN; ++n)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int d = d0 + mt * 16 + g8 + half * 8, col = n * 8 + 2 * t4;
        float2 x = make_float2(0.f, 0.f);
        if (h_in) x = *reinterpret_cast<const float2*>(h_in + static_cast<std::int64_t>(d) * kD + col);
        hs[mt][n][half * 2] = x.x;
        hs[mt][n][half * 2 + 1] = x.y;
      }
  auto write_h_bf16 = [&]() {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int n = 0; n < NN; ++n)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int d = d0 + mt * 16 + g8 + half * 8, col = n * 8 + 2 * t4;
          *reinterpret_cast<std::uint32_t*>(s.h + d * LDV + col) =
              pack_bf16x2(hs[mt][n][half * 2], hs[mt][n][half * 2 + 1]);
        }
  };
  write_h_bf16();
  const int c_end = sb.c_end;
  if (sb.c_begin < c_end) {
    load_k(sb.c_begin);
    load_small(sb.c_begin);
    if constexpr (kPrefetch) load_v(sb.c_begin);
    cp_async_commit();
    cp_async_wait<0>();
  }
  if (tid == 0) s.nonfinite = 0;
  __syncthreads();

  for (int c = sb.c_begin; c < c_end; ++c) {
    const int t0 = c * C, len = min(C, sb.sq.len - t0);
    const __nv_bfloat16* kc = s.k[c & 1];
    decltype(auto) rw = h_chunk_rows(s, kPrefetch ? c : 0);  // chunk c's G, Gr, beta (the plain schedule: s itself)
    if constexpr (kPrefetch) {  // chunk c + 1's k, G, Gr, beta into chunk c - 1's buffers (read before the last barrier)
      if (c + 1 < c_end) {
        load_k(c + 1);
        load_rows(c + 1);
      }
      cp_async_commit();
    }
    store_tile<kD, kVT>(hcg + static_cast<std::int64_t>(c) * kD * kD, kD, s.h, tid);  // h_c, as the tensor cores read it
    std::uint32_t vr[NN][2];
    if constexpr (!kPrefetch) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int i = r0 + g8 + half * 8;
        const __nv_bfloat16* vrow = a.v + (sb.vtokb + static_cast<std::int64_t>(t0 + i) * sb.HV) * kD + sb.v0;
#pragma unroll
        for (int n = 0; n < NN; ++n)
          vr[n][half] = i < len ? *reinterpret_cast<const std::uint32_t*>(vrow + n * 8 + 2 * t4) : 0u;
      }
    }

    float GL;  // G_last, the decay of the state across the chunk (phase C)
    if constexpr (!kDelta) {
      // No delta rule: V_new = V (T = I, no K h; the chunk kernel reads v itself). Only e^{G_last - G} V, for phase C.
      GL = s.G[C - 1];
      h_vd_epilogue(s, r0, g8, t4, vr, pair);
      __syncthreads();  // e^{G_last - G} V visible; every warp is done with h (its copy out), G, Gr
      if (c + 1 < c_end) {
        load_k(c + 1);
        load_small(c + 1);
      }
      cp_async_commit();
    } else {
    // Phase A: K h (C x kVT, inner K), X = beta V - beta e^G (K h).
    float ax[NN][4];
#pragma unroll
    for (int n = 0; n < NN; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) ax[n][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
      std::uint32_t ak[4];
      ldsm_a(ak, kc, kLd, r0, ks * 16, lane);
#pragma unroll
      for (int np = 0; np < NP; ++np) {
        std::uint32_t bh4[4];
        ldsm_b_kn(bh4, s.h, LDV, ks * 16, np * 16, lane);
        mma_bf16_16816(ax[2 * np], ak, bh4[0], bh4[1]);
        mma_bf16_16816(ax[2 * np + 1], ak, bh4[2], bh4[3]);
      }
    }
    if constexpr (kPrefetch) {  // chunk c's T and v rows (issued after chunk c - 1's phase B); v from xl
      cp_async_wait<1>();  // (all but chunk c + 1's k, G, Gr, beta)
      __syncthreads();
#pragma unroll
      for (int half = 0; half < 2; ++half)
#pragma unroll
        for (int n = 0; n < NN; ++n) vr[n][half] = *pair(s.xl, r0 + g8 + half * 8, n * 8 + 2 * t4);
    }
    h_x_epilogue(rw, r0, g8, t4, vr, ax, s.x, s.xl, pair);  // (sets s.nonfinite where X is not finite)
    __syncthreads();  // X visible; every warp is done with h (and its copy out)
    if constexpr (!kPrefetch) {
      if (c + 1 < c_end) load_k(c + 1);
      cp_async_commit();
    }

    // Phase B: V_new = T X (T lower triangular: k tiles <= warp), X in two bf16 pieces (X and its residual) and
    // V_new stored in two (V_new and its residual), and the dh kernel stores dh' in two: the chunk kernel's
    // V_new dh'^T term of dk (three products: V_new dh'^T, residual(V_new) dh'^T, V_new residual(dh')^T) then
    // carries none of the three roundings. Near a sequence's end that term (with dht) is most of dk, and each of the two bf16 roundings cost
    // about u of those rows' size: with q, v, dout, h0, dht scaled by 1e-3 (kgate's oracle sweep; k, g, beta not
    // scaled) dk concentrates in the last tokens (the other terms scale as 1e-9 there, not 1e-6), and at
    // ecef461 the H200 needed 1.02x the contract's 2^-4 rms(dk) there. Cost: one more m16n8k16 per T X tile,
    // two more (C x K x V) products in the chunk kernel, the residuals of V_new and dh' in the workspace (bench notes).
    float an[NN][4];
#pragma unroll
    for (int n = 0; n < NN; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) an[n][e] = 0.f;
    // A NaN or Inf in X_m (from v_m) must stay out of V_new_i, i < m, where T_im = 0: the exact V_new_i, and so
    // the exact dg of every token up to m, does not depend on v_m. The diagonal tile's mma would form 0 * NaN,
    // so in a chunk whose X is not finite that tile is summed over m <= i alone, in FMAs (m ascending).
    // Tiles left of the diagonal have m < i throughout. Finite chunks (every other) keep the mma.
    const bool scalar_diag = s.nonfinite != 0;
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      if (ks < warp || (ks == warp && !scalar_diag)) {
        std::uint32_t at[4];
        ldsm_a(at, s.T, LD64, r0, ks * 16, lane);
#pragma unroll
        for (int np = 0; np < NP; ++np) {
          std::uint32_t bx[4];
          ldsm_b_kn(bx, s.xl, LDV, ks * 16, np * 16, lane);
          mma_bf16_16816(an[2 * np], at, bx[0], bx[1]);
          mma_bf16_16816(an[2 * np + 1], at, bx[2], bx[3]);
          ldsm_b_kn(bx, s.x, LDV, ks * 16, np * 16, lane);
          mma_bf16_16816(an[2 * np], at, bx[0], bx[1]);
          mma_bf16_16816(an[2 * np + 1], at, bx[2], bx[3]);
        }
      }
    }
    if (scalar_diag)  // the diagonal tile over m <= i alone
      h_tx_rows(an, r0, r0, g8, t4, [&](int i, int m) { return __bfloat162float(s.T[i * LD64 + m]); }, s.x, s.xl, pair);
    GL = rw.G[C - 1];
    h_vnew_epilogue(rw, r0, g8, t4, an, pair, [&](int i, int col, std::uint32_t hi, std::uint32_t lo) {
      *pair(s.vn, i, col) = hi;
      *pair(s.vnl, i, col) = lo;
    });
    __syncthreads();  // V_new visible; every warp is done with T, X, G, beta
    if (tid == 0) s.nonfinite = 0;  // read in phase B only, set next in chunk c + 1's phase A (two barriers on)
    if (c + 1 < c_end) {
      if constexpr (kPrefetch) {  // T, x, xl were read by phase B alone
        load_T(c + 1);
        load_v(c + 1);
      } else {
        load_small(c + 1);
      }
    }
    cp_async_commit();
    if constexpr (kVnewOut) {
      store_tile<C, kVT>(vng + static_cast<std::int64_t>(t0) * kD, kD, s.vn, tid);
      store_tile<C, kVT>(vnlg + static_cast<std::int64_t>(t0) * kD, kD, s.vnl, tid);
    }
    }  // kDelta

    // Phase C: h = e^{G_last} h + K^T (e^{G_last - G} V_new); e^{G_last} as the wgmma h pass's, one ex2.approx.
    const float decay = gdn::exp_approx(GL);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int n = 0; n < NN; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) hs[mt][n][e] *= decay;
#pragma unroll
    for (int ks = 0; ks < C / 16; ++ks) {
      std::uint32_t ak[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) ldsm_a_trans(ak[mt], kc, kLd, d0 + mt * 16, ks * 16, lane);
#pragma unroll
      for (int np = 0; np < NP; ++np) {
        std::uint32_t bv[4];
        ldsm_b_kn(bv, s.vnd, LDV, ks * 16, np * 16, lane);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_bf16_16816(hs[mt][2 * np], ak[mt], bv[0], bv[1]);
          mma_bf16_16816(hs[mt][2 * np + 1], ak[mt], bv[2], bv[3]);
        }
      }
    }
    write_h_bf16();  // h was last read before the first barrier
    if constexpr (kPrefetch)
      cp_async_wait<1>();  // chunk c + 1: k, G, Gr, beta (its T and v: before its phase-A epilogue)
    else
      cp_async_wait<0>();  // chunk c + 1: k, T, G, beta
    __syncthreads();     // h and chunk c + 1's tiles visible; every warp is done with k, vn, vnd
  }
}

// ---------------------------------------------------------------------------------------------------------
// Kernel dh: the reverse-state pass, chunks last to first, the state gradient slice (K x kVT) in fp32 registers
// (each warp 32 rows), a bf16 copy in shared memory. Per chunk, with dh' the gradient leaving the chunk:
//   dV_new = e^{G_L - G} . (K dh') + P^T dO   (P^T = scale triu(Gamma^T . K Q^T), kept as A fragments)
//   dX = T^T dV_new;  dv = beta . dX;  dbeta_v = rowsum(dX . V) (this slice)
//   dh = e^{G_L} dh' + Q^T (scale e^G . dO) + K^T (-beta e^G . dX)
// Slices of 32 or 16 columns leave room to double-buffer q and k (chunk c in buffer c % 2), so chunk c - 1's
// arrive while chunk c computes and a barrier goes; at 64 columns that would cost the second block per SM.
template <int kVT>
inline constexpr int kDhQkBuffers = kVT <= 32 ? 2 : 1;

template <int kVT, int kD = gdn::DK>
struct DhSmem {
  static constexpr int kLd = kD + 8;       // row stride of the (C x K) tiles
  __nv_bfloat16 q[kDhQkBuffers<kVT>][C * kLd];  // (C, K) per buffer
  __nv_bfloat16 k[kDhQkBuffers<kVT>][C * kLd];  // (C, K) per buffer
  __nv_bfloat16 T[C * LD64];               // (C, C)
  __nv_bfloat16 ds[kD * Slice<kVT>::LD];   // (K, kVT) bf16 copy of dh'
  __nv_bfloat16 dO[C * Slice<kVT>::LD];    // (C, kVT) dO slice
  __nv_bfloat16 dvn[C * Slice<kVT>::LD];   // (C, kVT) dV_new
  __nv_bfloat16 y[C * Slice<kVT>::LD];     // (C, kVT) scale e^G dO
  __nv_bfloat16 z[C * Slice<kVT>::LD];     // (C, kVT) -beta e^G dX
  float G[C];
  float Gr[C];
  float beta[C];
  float red[C * 4];                        // rowsum(dX . V) partials, one per lane of a row's quad
};

// The per-chunk epilogues of dh_kernel and dh_wgmma_kernel (gdn_bwd_dh_wgmma.cuh): the same stores of the same
// values at the same (row, column). The kernels differ only in where a thread's fragment pair sits and in their
// slice tiles' layouts, which the callers pass as accessors: pair(.., n, half) the fp32 pair (a float2) at columns
// 8n + 2t4 (+1) of the fragment's row `half` (or state row row(mt, half)), word(i, n) the address of the 4-byte
// word of row i, columns 8n + 2t4 (+1), of a (C x kVT) shared tile.

// The dh passes' decays (dh_kernel, dh_wgmma_kernel, the fused kernel's S part, dh2_kernel: the same words each) are
// gdn::exp_approx's (gdn_fwd_mma.cuh), one ex2.approx.ftz each, as the forward state pass's.
// P^T's decay e^{Gr_j - Gr_i} from Gri2 = Gr_i log2 e, formed once a row: one FFMA and one MUFU.EX2 an element.
__device__ __forceinline__ float dh_exp_pair(float Grj, float Gri2) { return ex2_approx(fmaf(Grj, gdn::kLog2e, -Gri2)); }

// f(mt, n, half) for each fp32 pair of a thread's state fragments: MT row tiles, NN 8-column blocks, 2 rows each.
template <int MT, int NN, class F>
__device__ __forceinline__ void for_state_pairs(F f) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int n = 0; n < NN; ++n)
#pragma unroll
      for (int half = 0; half < 2; ++half) f(mt, n, half);
}

// dh_{c+1}'s bf16 residual, from the fp32 state fragments its bf16 copy was written from (4-byte stores; no tile
// to stage it in). dst: chunk c's (K x K) residual block at the slice's first column.
template <int kD, int MT, int NN, class Row, class Pair>
__device__ __forceinline__ void store_state_residual(__nv_bfloat16* dst, int t4, Row row, Pair pair) {
  for_state_pairs<MT, NN>([&](int mt, int n, int half) {
    const int d = row(mt, half), col = n * 8 + 2 * t4;
    const float2 x = pair(mt, n, half);
    *reinterpret_cast<std::uint32_t*>(dst + d * kD + col) = bf16x2_residual(x.x, x.y, pack_bf16x2(x.x, x.y));
  });
}

// The (C x kVT) fragments (rows r0 + g8, + 8) as bf16 to a shared tile: dV_new for phase B.
template <int NN, class Pair, class Word>
__device__ __forceinline__ void store_pairs_bf16(int r0, int g8, Pair pair, Word word) {
#pragma unroll
  for (int half = 0; half < 2; ++half)
#pragma unroll
    for (int n = 0; n < NN; ++n) {
      const float2 x = pair(n, half);
      *word(r0 + g8 + half * 8, n) = pack_bf16x2(x.x, x.y);
    }
}

// No delta rule: dv = dX = dV_new (T = I, no beta), the fp32 sums rounded once, rows < len.
template <int kD, int NN, class Pair>
__device__ __forceinline__ void store_dv_rows(const GdnBwdArgs& a, const StateBlock& sb, int t0, int len, int r0,
                                              int g8, int t4, Pair pair) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = r0 + g8 + half * 8;
    __nv_bfloat16* dvrow = a.dv + (sb.vtokb + static_cast<std::int64_t>(t0 + i) * sb.HV) * kD + sb.v0;
#pragma unroll
    for (int n = 0; n < NN; ++n)
      if (i < len) {
        const float2 x = pair(n, half);
        *reinterpret_cast<std::uint32_t*>(dvrow + n * 8 + 2 * t4) = pack_bf16x2(x.x, x.y);
      }
  }
}

// Phase B's epilogue (delta rule), dX = T^T dV_new in the fragments: dv = beta dX (rows < len), dX to the
// workspace (dxg: the chunk slots' (C x K) blocks at the slice's first column), z = -beta e^G dX to its tile, and
// this lane's share of rowsum(dX . V) (v(n, half): v's bf16 pair at the fragment's place) to s.red. zword nullptr:
// no z (dh2_kernel, whose dh update takes z0 and W instead).
template <int kD, int NN, class Smem, class Pair, class VPair, class ZWord>
__device__ __forceinline__ void dx_epilogue(Smem& s, const GdnBwdArgs& a, const StateBlock& sb, __nv_bfloat16* dxg,
                                            int t0, int len, int r0, int g8, int t4, Pair pair, VPair v, ZWord zword) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = r0 + g8 + half * 8;
    const float bi = s.beta[i], zi = -bi * gdn::exp_approx(s.G[i]);
    __nv_bfloat16* dvrow = a.dv + (sb.vtokb + static_cast<std::int64_t>(t0 + i) * sb.HV) * kD + sb.v0;
    float rs = 0.f;
    // the row's v words read first: to the compiler z's stores (zword) may alias later v reads, so read in the loop
    // each waited for its own load before the next was issued
    std::uint32_t vw[NN];
#pragma unroll
    for (int n = 0; n < NN; ++n) vw[n] = v(n, half);
#pragma unroll
    for (int n = 0; n < NN; ++n) {
      const int col = n * 8 + 2 * t4;
      const float2 x = pair(n, half);
      const float x0 = x.x, x1 = x.y;
      const float2 vf = unpack_bf16x2(vw[n]);
      rs = fmaf(x0, vf.x, rs);
      rs = fmaf(x1, vf.y, rs);
      if (i < len) *reinterpret_cast<std::uint32_t*>(dvrow + col) = pack_bf16x2(bi * x0, bi * x1);
      *reinterpret_cast<std::uint32_t*>(dxg + static_cast<std::int64_t>(t0 + i) * kD + col) = pack_bf16x2(x0, x1);
      if constexpr (!std::is_same_v<ZWord, std::nullptr_t>) *zword(i, n) = pack_bf16x2(zi * x0, zi * x1);
    }
    s.red[i * 4 + t4] = rs;
  }
}

// Phase B's epilogue in the split dh pass's Es-only mode (dh_wgmma_kernel's kEsOnly: the fused sweep's pass A', which
// leaves Es alone): z = -beta e^G dX to its tile, dx_epilogue's words; no dv, dX or rowsum(dX . V) (nothing reads them).
template <int NN, class Smem, class Pair, class ZWord>
__device__ __forceinline__ void z_epilogue(Smem& s, int r0, int g8, Pair pair, ZWord zword) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = r0 + g8 + half * 8;
    const float zi = -s.beta[i] * gdn::exp_approx(s.G[i]);
#pragma unroll
    for (int n = 0; n < NN; ++n) {
      const float2 x = pair(n, half);
      *zword(i, n) = pack_bf16x2(zi * x.x, zi * x.y);
    }
  }
}

// This slice's dbeta partials of chunk c (t0 = c C): the four lanes' shares of each row summed in lane order.
__device__ __forceinline__ void store_dbeta_partials(const float* red, float* dbvg, int t0, int tid) {
  if (tid < C) dbvg[t0 + tid] = ((red[tid * 4] + red[tid * 4 + 1]) + red[tid * 4 + 2]) + red[tid * 4 + 3];
}

// The blocks an SM dh_kernel runs (shared memory: 2 at K = 128, 3 at K = 64; registers: 2 at K = 64 with 64 columns),
// told to ptxas: without it, ptxas 13.0 aimed some instantiations at more blocks than shared memory allows (168
// registers at K = 128, 128 at 16 columns) and spilled a few bytes there.
template <int kVT, int kD>
inline constexpr int kDhBlocks = kD == 128 || kVT == 64 ? 2 : 3;
static_assert(2 * (sizeof(DhSmem<64, 64>) + 1024) <= 228 * 1024 && 3 * (sizeof(DhSmem<32, 64>) + 1024) <= 228 * 1024 &&
                  4 * (sizeof(DhSmem<16, 64>) + 1024) > 228 * 1024 && 3 * (sizeof(DhSmem<16, 128>) + 1024) > 228 * 1024,
              "kDhBlocks: shared memory allows these, and no more at K = 128 or 16 columns");
template <int kVT, int kD = gdn::DK, bool kDelta = true>
__global__ void __launch_bounds__(kThreads, kDhBlocks<kVT, kD>) dh_kernel(const __grid_constant__ GdnBwdArgs a) {
  static_assert(kD == 64 || kD == 128, "K = V = 64 or 128");
  using SL = Slice<kVT>;
  constexpr int NN = SL::NN, NP = SL::NP, LDV = SL::LD;
  constexpr int kLd = kD + 8, MT = kD / 64;  // q's and k's row stride; 16-row tiles of this warp's kD / 4 state rows
  extern __shared__ __align__(16) char smem_raw[];
  DhSmem<kVT, kD>& s = *reinterpret_cast<DhSmem<kVT, kD>*>(smem_raw);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g8 = lane >> 2, t4 = lane & 3;
  StateBlock sb;
  if (!state_block<kVT, kD, kDelta, true>(a, sb)) return;  // invalid packed offsets: the poison kernel writes every output
  __nv_bfloat16* dhg = a.dhc + sb.R * kD * kD + sb.v0;
  __nv_bfloat16* dhlg = a.dhcl + sb.R * kD * kD + sb.v0;
  // dX and this slice's nch C floats of dbv, with the delta rule only (dX = dv and no dbeta without it)
  __nv_bfloat16* dxg = kDelta ? a.dx + sb.R * C * kD + sb.v0 : nullptr;
  float* dbvg = kDelta ? a.dbv + (sb.R * (kD / kVT) + static_cast<std::int64_t>(blockIdx.x) * sb.sq.nch) * C : nullptr;
  const int r0 = warp * 16, d0 = warp * (kD / 4);

  constexpr bool kDB = kDhQkBuffers<kVT> == 2;
  auto load_qk = [&](int c) {
    const int t0 = c * C, len = min(C, sb.sq.len - t0), buf = kDB ? (c & 1) : 0;
    load_tile<kD>(s.q[buf], a.q + (sb.tokb + static_cast<std::int64_t>(t0) * a.H) * kD, sb.row_stride, len, tid);
    load_tile<kD>(s.k[buf], a.k + (sb.tokb + static_cast<std::int64_t>(t0) * a.H) * kD, sb.row_stride, len, tid);
  };
  auto load_small = [&](int c) {
    const int t0 = c * C, len = min(C, sb.sq.len - t0);
    if constexpr (kDelta) {  // T and beta with the delta rule only
      const __nv_bfloat16* Tc = sb.Tw + static_cast<std::int64_t>(c) * C * C;
#pragma unroll
      for (int it = 0; it < C * 8 / kThreads; ++it) {
        const int e = tid + it * kThreads, r = e >> 3, cc = e & 7;
        cp_async_16(smem_addr(s.T + r * LD64 + cc * 8), Tc + r * C + cc * 8, true);
      }
    }
    constexpr int kPieces = kVT / 8;
#pragma unroll
    for (int it = 0; it < C * kPieces / kThreads; ++it) {
      const int e = tid + it * kThreads, r = e / kPieces, cc = e % kPieces;
      const bool in = r < len;
      const __nv_bfloat16* src = a.dout + (sb.vtokb + static_cast<std::int64_t>(t0 + r) * sb.HV) * kD + sb.v0 + cc * 8;
      cp_async_16(smem_addr(s.dO + r * LDV + cc * 8), in ? src : a.dout, in);
    }
    if (tid < C / 4) cp_async_16(smem_addr(s.G + tid * 4), sb.Gg + c * C + tid * 4, true);
    else if (tid < C / 2) {
      if constexpr (kDelta) cp_async_16(smem_addr(s.beta + (tid - C / 4) * 4), sb.Bg + c * C + (tid - C / 4) * 4, true);
    } else if (tid < 3 * C / 4) {
      cp_async_16(smem_addr(s.Gr + (tid - C / 2) * 4), sb.Grg + c * C + (tid - C / 2) * 4, true);
    }
  };

  // The gradient leaving the block's segment, at its slice: dht (or 0) for the last, 0 in pass A', else Es slot of
  // segment s (the reverse combine's); the one entering it goes to dh0 from segment 0, to Es slot of segment s - 1
  // from pass A' (dh_out, at the end).
  const float* dh_in = sb.seg == sb.nseg - 1 ? (a.dht ? a.dht + sb.hoff : nullptr)
                       : a.dh_ends          ? nullptr
                                            : a.Es + sb.soff + sb.seg * sb.slot_states;
  float ds[MT][NN][4];  // dh' slice: rows d0 + 16 mt + g8 (+8), columns 8 n + 2 t4 (+1)
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int n = 0; n < NN; ++n)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int d = d0 + mt * 16 + g8 + half * 8, col = n * 8 + 2 * t4;
        float2 x = make_float2(0.f, 0.f);
        if (dh_in) x = *reinterpret_cast<const float2*>(dh_in + static_cast<std::int64_t>(d) * kD + col);
        ds[mt][n][half * 2] = x.x;
        ds[mt][n][half * 2 + 1] = x.y;
      }
  auto write_ds_bf16 = [&]() {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int n = 0; n < NN; ++n)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int d = d0 + mt * 16 + g8 + half * 8, col = n * 8 + 2 * t4;
          *reinterpret_cast<std::uint32_t*>(s.ds + d * LDV + col) =
              pack_bf16x2(ds[mt][n][half * 2], ds[mt][n][half * 2 + 1]);
        }
  };
  write_ds_bf16();
  const int c_first = sb.c_begin;
  if (c_first < sb.c_end) {
    load_qk(sb.c_end - 1);
    load_small(sb.c_end - 1);
    cp_async_commit();
    cp_async_wait<0>();
  }
  __syncthreads();

  for (int c = sb.c_end - 1; c >= c_first; --c) {
    const int t0 = c * C, len = min(C, sb.sq.len - t0);
    const __nv_bfloat16* qc = s.q[kDB ? (c & 1) : 0];
    const __nv_bfloat16* kc = s.k[kDB ? (c & 1) : 0];
    if constexpr (kDB) {
      // chunk c - 1's q and k into the other buffer (last read by chunk c + 1, before the barrier that ended it)
      if (c > c_first) load_qk(c - 1);
      cp_async_commit();
    } else if (c > c_first) {
      // q and k of chunk c - 1 can only be loaded once phase C is done with this chunk's; their first touch goes
      // to L2 now so that the load after phase C is short. 2 x 64 rows of 2 kD bytes: 2 lines per thread at
      // kD = 128; at 64 a row is one line, touched twice.
      const int row = tid >> 1;
      const std::int64_t off = (sb.tokb + static_cast<std::int64_t>(t0 - C + row) * a.H) * kD + (tid & 1) * (kD / 2);
      prefetch_l2(a.q + off);
      prefetch_l2(a.k + off);
    }
    store_tile<kD, kVT>(dhg + static_cast<std::int64_t>(c) * kD * kD, kD, s.ds, tid);  // dh_{c+1} as bf16
    store_state_residual<kD, MT, NN>(  // and its bf16 residual
        dhlg + static_cast<std::int64_t>(c) * kD * kD, t4,
        [&](int mt, int half) { return d0 + mt * 16 + g8 + half * 8; },
        [&](int mt, int n, int half) { return make_float2(ds[mt][n][half * 2], ds[mt][n][half * 2 + 1]); });
    std::uint32_t vr[NN][2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int i = r0 + g8 + half * 8;
      const __nv_bfloat16* vrow = a.v + (sb.vtokb + static_cast<std::int64_t>(t0 + i) * sb.HV) * kD + sb.v0;
#pragma unroll
      for (int n = 0; n < NN; ++n)
        vr[n][half] = i < len ? *reinterpret_cast<const std::uint32_t*>(vrow + n * 8 + 2 * t4) : 0u;
    }

    // Phase A: K dh' (C x kVT, inner K) and K Q^T (C x C, upper column tiles j >= r0), rows r0..r0+15.
    float acc[NN][4], pt[8][4];
#pragma unroll
    for (int n = 0; n < NN; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[n][e] = 0.f;
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) pt[n][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
      std::uint32_t ak[4];
      ldsm_a(ak, kc, kLd, r0, ks * 16, lane);
#pragma unroll
      for (int np = 0; np < NP; ++np) {
        std::uint32_t bd[4];
        ldsm_b_kn(bd, s.ds, LDV, ks * 16, np * 16, lane);
        mma_bf16_16816(acc[2 * np], ak, bd[0], bd[1]);
        mma_bf16_16816(acc[2 * np + 1], ak, bd[2], bd[3]);
      }
#pragma unroll
      for (int np = 0; np < C / 16; ++np) {
        if (np >= warp) {
          std::uint32_t bq[4];
          ldsm_b_nk(bq, qc, kLd, np * 16, ks * 16, lane);
          mma_bf16_16816(pt[2 * np], ak, bq[0], bq[1]);
          mma_bf16_16816(pt[2 * np + 1], ak, bq[2], bq[3]);
        }
      }
    }
    const float GL = s.G[C - 1], GrL = s.Gr[C - 1];
    std::uint32_t pa[4][4];  // P^T as A fragments (k-tile kk = n-tiles 2kk, 2kk+1)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int i = r0 + g8 + half * 8;
      // decays between two tokens from Gr (P^T, ed), of the state entering the chunk from G (ey, and z, decay below)
      const float Gri2 = s.Gr[i] * gdn::kLog2e;
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        float pv[2];
        const float2 gj = *reinterpret_cast<const float2*>(s.Gr + n * 8 + 2 * t4);
        const float grj[2] = {gj.x, gj.y};
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          const int j = n * 8 + 2 * t4 + u;
          // P_ji, never exp of a positive: p_fragments' words (formed only where selected here; formed for every
          // element and selected, as p_fragments, it cost this kernel spills at kVT = 64, K = 128, ptxas 13.0)
          pv[u] = j >= i ? a.scale * dh_exp_pair(grj[u], Gri2) * pt[n][half * 2 + u] : 0.f;
        }
        pa[n >> 1][(n & 1) * 2 + half] = pack_bf16x2(pv[0], pv[1]);
      }
      const float ed = gdn::exp_approx(GrL - s.Gr[i]), ey = a.scale * gdn::exp_approx(s.G[i]);
#pragma unroll
      for (int n = 0; n < NN; ++n) {
        const int j0 = n * 8 + 2 * t4;
        acc[n][half * 2] *= ed;
        acc[n][half * 2 + 1] *= ed;
        const float2 dof = unpack_bf16x2(*reinterpret_cast<const std::uint32_t*>(s.dO + i * LDV + j0));
        *reinterpret_cast<std::uint32_t*>(s.y + i * LDV + j0) = pack_bf16x2(ey * dof.x, ey * dof.y);
      }
    }
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      if (ks >= warp) {
#pragma unroll
        for (int np = 0; np < NP; ++np) {
          std::uint32_t bo[4];
          ldsm_b_kn(bo, s.dO, LDV, ks * 16, np * 16, lane);
          mma_bf16_16816(acc[2 * np], pa[ks], bo[0], bo[1]);
          mma_bf16_16816(acc[2 * np + 1], pa[ks], bo[2], bo[3]);
        }
      }
    }
    // the epilogues' accessors: acc's pair (n, half); the word (i, n) of a (C x kVT) tile (rows kVT + 8 apart)
    const auto accp = [&](int n, int half) { return make_float2(acc[n][half * 2], acc[n][half * 2 + 1]); };
    const auto tile_word = [&](__nv_bfloat16* t, int i, int n) {
      const int col = n * 8 + 2 * t4;
      return reinterpret_cast<std::uint32_t*>(t + i * LDV + col);
    };
    if constexpr (!kDelta) {
      // No delta rule: dv = dX = dV_new; no dX, z or dbeta partials (nothing reads them).
      store_dv_rows<kD, NN>(a, sb, t0, len, r0, g8, t4, accp);
      __syncthreads();  // y visible; every warp is done with dO, G, Gr, dh'
      if (c > c_first) load_small(c - 1);
      cp_async_commit();
    } else {
    store_pairs_bf16<NN>(r0, g8, accp, [&](int i, int n) {
      return reinterpret_cast<std::uint32_t*>(s.dvn + i * LDV + n * 8 + 2 * t4);
    });
    __syncthreads();  // dV_new visible

    // Phase B: dX = T^T dV_new (T^T upper triangular: k tiles >= warp).
#pragma unroll
    for (int n = 0; n < NN; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[n][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      if (ks >= warp) {
        std::uint32_t at[4];
        ldsm_a_trans(at, s.T, LD64, r0, ks * 16, lane);
#pragma unroll
        for (int np = 0; np < NP; ++np) {
          std::uint32_t bv[4];
          ldsm_b_kn(bv, s.dvn, LDV, ks * 16, np * 16, lane);
          mma_bf16_16816(acc[2 * np], at, bv[0], bv[1]);
          mma_bf16_16816(acc[2 * np + 1], at, bv[2], bv[3]);
        }
      }
    }
    dx_epilogue<kD, NN>(s, a, sb, dxg, t0, len, r0, g8, t4, accp, [&](int n, int half) { return vr[n][half]; },
                        [&](int i, int n) { return tile_word(s.z, i, n); });
    __syncthreads();  // y, z, red visible; every warp is done with dV_new, T, dO, G, beta, dh'
    if (c > c_first) load_small(c - 1);
    cp_async_commit();
    store_dbeta_partials(s.red, dbvg, t0, tid);
    }  // kDelta

    // Phase C: dh = e^{G_L} dh' + Q^T y + K^T z (no delta rule: no K^T z).
    const float decay = gdn::exp_approx(GL);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int n = 0; n < NN; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) ds[mt][n][e] *= decay;
#pragma unroll
    for (int ks = 0; ks < C / 16; ++ks) {
      std::uint32_t aq[MT][4], ak[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        ldsm_a_trans(aq[mt], qc, kLd, d0 + mt * 16, ks * 16, lane);
        if constexpr (kDelta) ldsm_a_trans(ak[mt], kc, kLd, d0 + mt * 16, ks * 16, lane);
      }
#pragma unroll
      for (int np = 0; np < NP; ++np) {
        std::uint32_t by[4], bz[4];
        ldsm_b_kn(by, s.y, LDV, ks * 16, np * 16, lane);
        if constexpr (kDelta) ldsm_b_kn(bz, s.z, LDV, ks * 16, np * 16, lane);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_bf16_16816(ds[mt][2 * np], aq[mt], by[0], by[1]);
          mma_bf16_16816(ds[mt][2 * np + 1], aq[mt], by[2], by[3]);
          if constexpr (kDelta) {
            mma_bf16_16816(ds[mt][2 * np], ak[mt], bz[0], bz[1]);
            mma_bf16_16816(ds[mt][2 * np + 1], ak[mt], bz[2], bz[3]);
          }
        }
      }
    }
    write_ds_bf16();  // dh' was last read in phase A
    if constexpr (!kDB) {
      __syncthreads();  // every warp is done with q, k
      if (c > c_first) load_qk(c - 1);
      cp_async_commit();
    }
    cp_async_wait<0>();
    __syncthreads();  // chunk c - 1's tiles and dh' visible; every warp is done with y, z, red
  }

  float* dh_out = sb.seg == 0 ? (a.dh0 ? a.dh0 + sb.hoff : nullptr)
                  : a.dh_ends ? a.Es + sb.soff + (sb.seg - 1) * sb.slot_states
                              : nullptr;
  if (dh_out) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int n = 0; n < NN; ++n)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int d = d0 + mt * 16 + g8 + half * 8, col = n * 8 + 2 * t4;
          *reinterpret_cast<float2*>(dh_out + static_cast<std::int64_t>(d) * kD + col) =
              make_float2(ds[mt][n][half * 2], ds[mt][n][half * 2 + 1]);
        }
  }
}


// ---------------------------------------------------------------------------------------------------------
// The chunk kernel's parts that do not depend on how the tiles are laid out or multiplied, one implementation for
// chunk_kernel (below) and chunk_wgmma_kernel (gdn_bwd_wgmma.cuh). Smem is ChunkSmem or ChunkWgSmem (the same
// fields G, Gr, beta, dbv, rowp, colp, hdot, dG, t3); a tile's layout comes in as a callable.

// The row and column partials of phases 1 and 2 in shared memory (every chunk kernel's rowp and colp), partial-major:
// rowp[r][slot][i] (r: M, D, Q.(dO h^T), K.(dX h^T), K.(V_new dh'^T); kSlots slots a row, chunk_phase3 sums them in
// slot order), colp[warp * 8 + row group][j]. chunk_phase3's thread i reads word i of each partial, 32 lanes on 32
// consecutive words: one shared-memory wavefront a load, where the row-major [C][32] colp (a lane's row 128 bytes
// from the next lane's) made each of its 32 loads a 32-way bank conflict and the [C][kSlots] rowp each of its 40 an
// 8-way one, while phase 3's other warps waited at its barrier. Rows padded by 8 words, so that the writers' lanes
// (rows r0 + g8, slots or columns from t4) fall in different banks: rowp's 32 lanes 32 banks, colp's 2 a bank (it
// was 4 a bank). The layout moves no word: every sum adds the same partials in the same order.
inline constexpr int kPartLd = C + 8;
template <int kSlots>
using RowPartials = float[5][kSlots][kPartLd];
using ColPartials = float[32][kPartLd];

// The block's chunk (chunk_of) and where its data lies; false for a block past the last chunk (the same for the
// whole block).
struct ChunkAt {
  int HV, NT, t0, len;       // value heads; the sequence's chunks; the chunk's first token in it and its tokens (<= C)
  std::int64_t R, sl0;       // the slots of the sequence's chunk 0 and of this chunk
  std::int64_t qtok0, tok0;  // q/k token (begin + t0, h); do/dg/dbeta token (begin + t0, hv)
  std::int64_t trow;         // the chunk's first token row of the (B T, heads) matrices: begin + t0
  int h, hv;                 // its q/k head and value head
};
// Grid slot (bx, by) (chunk_of); the block's own by default.
__device__ __forceinline__ bool chunk_at(const GdnBwdArgs& a, int bx, int by, ChunkAt& p) {
  p.HV = a.value_heads();
  Seq sq;
  int hv, c;
  if (!chunk_of(a, bx, by, sq, hv, c)) return false;
  const int h = hv / (p.HV / a.H);
  p.NT = sq.nch;
  p.R = first_slot(a, sq, hv);
  p.sl0 = p.R + c;
  p.t0 = c * C;
  p.len = min(C, sq.len - p.t0);
  p.trow = sq.begin + p.t0;
  p.h = h;
  p.hv = hv;
  p.qtok0 = p.trow * a.H + h;
  p.tok0 = p.trow * p.HV + hv;
  return true;
}
__device__ __forceinline__ bool chunk_at(const GdnBwdArgs& a, ChunkAt& p) {
  return chunk_at(a, static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y), p);
}

// Phase 1's partials of a thread: M and D of its two rows, M of its 16 columns (both rows).
struct Phase1Partials {
  float rowM[2] = {0.f, 0.f}, rowD[2] = {0.f, 0.f}, colM[8][2] = {};
};

// Element e (0..3, the m16n8 C fragment: rows g8 and g8 + 8, columns 2 t4 and 2 t4 + 1) of 8-column block n of a
// warp's (16 x 8 kNB) accumulator: acc[n][e] in chunk_kernel (mma.sync, 64 columns), d[4n + e] in
// chunk_wgmma_kernel (wgmma, a warpgroup's 32 columns of a 64-column part). kAccBlocks: the 8-column blocks.
__device__ __forceinline__ float frag(const float (&acc)[8][4], int n, int e) { return acc[n][e]; }
template <int R>
__device__ __forceinline__ float frag(const float (&acc)[R], int n, int e) { return acc[4 * n + e]; }
template <class Acc>
inline constexpr int kAccBlocks = static_cast<int>(sizeof(Acc) / (4 * sizeof(float)));

// Group 1's scalars: G, beta (the delta rule), Gr of the chunk's slot, and the dbeta partials of its nsl slices.
template <bool kDelta, class Smem>
__device__ __forceinline__ void load_chunk_scalars(Smem& s, const GdnBwdArgs& a, int tid, std::int64_t R, std::int64_t sl0,
                                                   int nsl, int NT, int t0) {
  {
    const std::int64_t o = sl0 * C;
    if (tid < 16) cp_async_16(smem_addr(s.G + tid * 4), a.G + o + tid * 4, true);
    else if (tid < 32) {
      if constexpr (kDelta) cp_async_16(smem_addr(s.beta + (tid - 16) * 4), a.Bc + o + (tid - 16) * 4, true);
    } else if (tid < 48) cp_async_16(smem_addr(s.Gr + (tid - 32) * 4), a.Gr + o + (tid - 32) * 4, true);
  }
  if constexpr (kDelta)
    for (int e = tid; e < nsl * 16; e += kThreads) {
      const int sl = e >> 4, pc = e & 15;
      cp_async_16(smem_addr(s.dbv[sl] + pc * 4), a.dbv + (R * nsl + static_cast<std::int64_t>(sl) * NT) * C + t0 + pc * 4, true);
    }
}

// Phase 1's epilogue of one pass, the thread's two rows i of x, y (pass 0: x = Q K^T, y = dO V_new^T; pass 1:
// x = K K^T, y = dX V_new^T = -dL, the delta rule only) over the accumulators' columns j0 .. j0 + 8 kNB - 1 (all
// 64 in chunk_kernel; a warpgroup's 32 in chunk_wgmma_kernel): dA (pass 0) or E (pass 1) as bf16 pairs through
// pair(tile, i, column), and the row and column partials of M (and D) over those columns.
template <class Smem, class Acc, class Pair>
__device__ __forceinline__ void phase1_epilogue(Smem& s, const GdnBwdArgs& a, int pass, int len, int r0, int g8, int t4,
                                                const Acc& x, const Acc& y, Phase1Partials& p, Pair pair, int j0 = 0) {
  // Gamma_ij = e^{Gr_i - Gr_j} as one ex2_approx of Gr_i log2 e - Gr_j log2 e, Gr scaled once per row (2) and
  // column pair (per n-tile, for both rows) as the forward's P (gdn_fwd_mma.cuh, state_phase_a_epilogue); the
  // masks are selects of the products (right of the diagonal the exponent is positive: +Inf or NaN there is
  // selected away, never multiplied by 0; -Inf in Gr gives 0, a NaN stays NaN). n-tiles outer, rows inner: every
  // partial still adds its terms in ascending column order.
  const float Gr2[2] = {s.Gr[r0 + g8] * gdn::kLog2e, s.Gr[r0 + g8 + 8] * gdn::kLog2e};
  const float bi[2] = {s.beta[r0 + g8], s.beta[r0 + g8 + 8]};
  // The masks as one compare of the column each: j < le[half] for j <= i, j < lt[half] for j < i, both false in a
  // row past the chunk's tokens (no branch a row and n-tile).
  int le[2], lt[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = r0 + g8 + half * 8;
    le[half] = i < len ? i + 1 : 0;
    lt[half] = i < len ? i : 0;
  }
#pragma unroll
  for (int n = 0; n < kAccBlocks<Acc>; ++n) {
    const float2 Grj = *reinterpret_cast<const float2*>(&s.Gr[j0 + n * 8 + 2 * t4]);
    const float Grj2[2] = {Grj.x * gdn::kLog2e, Grj.y * gdn::kLog2e};
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int i = r0 + g8 + half * 8;
      float out[2];
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int j = j0 + n * 8 + 2 * t4 + u;
        const float xv = frag(x, n, half * 2 + u), yv = frag(y, n, half * 2 + u);
        // Rows past the chunk's tokens (i >= len) are zero in exact arithmetic (q, k, dO, beta padded with
        // 0) but not in the products: dO_i V_new_j^T is 0 * NaN when V_new_j holds a NaN or Inf of v, and
        // that NaN would reach every dg_j through the reverse cumulative sum; they are skipped. So is M's
        // diagonal (dP_ii P_ii), which adds to dG_i and subtracts from it again (Gamma_ii = 1): the
        // difference is 0 exactly, but NaN - NaN for a non-finite V_new_i, which the exact dg_i does not see.
        const float gam = ex2_approx(Gr2[half] - Grj2[u]);
        const bool off = j < lt[half];  // j < i, i < len
        float o, m;
        if (pass == 0) {
          const float sg = a.scale * gam;
          o = j < le[half] ? sg * yv : 0.f;  // dA
          m = off ? yv * sg * xv : 0.f;      // dP . P, off the diagonal
        } else {
          const float d = -gam * xv * yv;  // Gamma . KK^T . dL
          o = off ? -bi[half] * gam * yv : 0.f;  // E
          m = off ? bi[half] * d : 0.f;          // dL . L
          p.rowD[half] += off ? d : -0.f;        // (+ -0: every sum unchanged, a -0 one included)
        }
        out[u] = o;
        p.rowM[half] += m;
        p.colM[n][u] += m;
      }
      *pair(pass == 0 ? s.dA : s.E, i, j0 + n * 8 + 2 * t4) = pack_bf16x2(out[0], out[1]);
    }
  }
}

// Phase 1's partials and their places in shared memory: M and D per row and slot (chunk_kernel: the lane of a quad,
// t4; chunk_wgmma_kernel: 4 warpgroup + t4), M per column (kNB blocks of 8 from j0, as phase1_epilogue) and (warp,
// row group). f(shared word, partial) for each pair: the one layout store_phase1_partials writes and
// load_phase1_partials reads back (the fused sweep's S continues W's pass-0 partials from those words).
template <int kNB, class Smem, class P, class F>
__device__ __forceinline__ void for_phase1_partials(Smem& s, P& p, int warp, int g8, int t4, int j0, int slot, F f) {
  const int r0 = warp * 16, sl = slot < 0 ? t4 : slot;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = r0 + g8 + half * 8;
    f(s.rowp[0][sl][i], p.rowM[half]);
    f(s.rowp[1][sl][i], p.rowD[half]);
  }
#pragma unroll
  for (int n = 0; n < kNB; ++n)
#pragma unroll
    for (int u = 0; u < 2; ++u) f(s.colp[warp * 8 + g8][j0 + n * 8 + 2 * t4 + u], p.colM[n][u]);
}
template <int kNB = 8, class Smem>
__device__ __forceinline__ void store_phase1_partials(Smem& s, const Phase1Partials& p, int warp, int g8, int t4,
                                                      int j0 = 0, int slot = -1) {
  for_phase1_partials<kNB>(s, p, warp, g8, t4, j0, slot, [](float& w, float x) { w = x; });
}
template <int kNB = 8, class Smem>
__device__ __forceinline__ void load_phase1_partials(const Smem& s, Phase1Partials& p, int warp, int g8, int t4,
                                                     int j0 = 0, int slot = -1) {
  for_phase1_partials<kNB>(s, p, warp, g8, t4, j0, slot, [](float w, float& x) { x = w; });
}

// Phase 2's per-row factors of the thread's two rows: e^{G_i}, beta_i (0 without the delta rule), e^{G_L - G_i}.
// The row decays here and in chunk_phase3 are one ex2_approx of expf's own argument times log2 e each (as the
// forward's row decays: no ulp of |G| added to a small difference; below 2^-126 flushed to 0, -Inf gives 0).
template <bool kDelta, class Smem>
__device__ __forceinline__ void phase2_row_factors(const Smem& s, int r0, int g8, float GrL, float (&eg)[2], float (&bi)[2],
                                                   float (&el)[2]) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = r0 + g8 + half * 8;
    eg[half] = gdn::exp_approx(s.G[i]);
    bi[half] = kDelta ? s.beta[i] : 0.f;
    el[half] = gdn::exp_approx(GrL - s.Gr[i]);
  }
}

// rd += rowsum(X . acc) over the accumulators' columns (n0 .. n0 + 8 kNB - 1: a 64-column part in chunk_kernel,
// a warpgroup's 32 columns of one in chunk_wgmma_kernel), X's bf16 pairs through pair(i, column).
template <class Acc, class Pair>
__device__ __forceinline__ void add_row_dot(float (&r)[2], const Acc& acc, int r0, int g8, int t4, int n0, Pair pair) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = r0 + g8 + half * 8;
#pragma unroll
    for (int n = 0; n < kAccBlocks<Acc>; ++n) {
      const float2 xf = unpack_bf16x2(*pair(i, n0 + n * 8 + 2 * t4));
      r[half] = fmaf(xf.x, frag(acc, n, half * 2), r[half]);
      r[half] = fmaf(xf.y, frag(acc, n, half * 2 + 1), r[half]);
    }
  }
}

// A (C x 8 kNB) part of dq or dk, columns n0 .. n0 + 8 kNB - 1. HV = H: bf16 to dst (B, T, H, K). HV > H: fp32 to dst32
// (B, T, HV, K), this value head's share, which the group kernel sums over the group and rounds.
template <int kD, class Acc>
__device__ __forceinline__ void store_qk_rows(const GdnBwdArgs& a, __nv_bfloat16* dst, float* dst32, const Acc& acc, int n0,
                                           int len, int HV, std::int64_t qtok0, std::int64_t tok0, int r0, int g8, int t4) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = r0 + g8 + half * 8;
    if (i < len && HV == a.H) {
      __nv_bfloat16* row = dst + (qtok0 + static_cast<std::int64_t>(i) * a.H) * kD + n0;
#pragma unroll
      for (int n = 0; n < kAccBlocks<Acc>; ++n)
        *reinterpret_cast<std::uint32_t*>(row + n * 8 + 2 * t4) = pack_bf16x2(frag(acc, n, half * 2), frag(acc, n, half * 2 + 1));
    } else if (i < len) {
      float* row = dst32 + (tok0 + static_cast<std::int64_t>(i) * HV) * kD + n0;
#pragma unroll
      for (int n = 0; n < kAccBlocks<Acc>; ++n)
        *reinterpret_cast<float2*>(row + n * 8 + 2 * t4) = make_float2(frag(acc, n, half * 2), frag(acc, n, half * 2 + 1));
    }
  }
}

// The in-kernel group sums of dq, dk (HV > H, a.qkt set: chunk_kernel and chunk_wgmma_kernel with GLR_BWD_GROUP_KERNEL=0;
// otherwise, and behind chunk_tma_kernel and fused_bwd_kernel, a.qkt stays null and group_kernel runs instead). Every value head's block
// writes its fp32 shares (store_qk_rows) as for group_kernel; at its end it takes a ticket of its (chunk of the batch,
// q/k head) tile, and the block that takes the G-th (G = HV / H) sums the group's G shares of each element in
// ascending value-head order with group_kernel's fp32 arithmetic (p_0, + p_1, ..., + p_{G-1}; one rounding to bf16),
// so dq, dk are group_kernel's words whichever block arrives last. Ordering, as cooperative groups' grid barrier:
// every thread's share stores, the block barrier, thread 0's gpu-scope fence (__threadfence, cumulative over what
// the barrier ordered before it) and its ticket (release); its fence after the ticket and the barrier before the
// last block's loads (acquire), which go to L2 (ld.global.cg: no stale L1 line). One fence pair a block, by one
// thread (not a fence per thread: that would make every thread wait for its own stores). The tickets are zeroed by
// launch_all before the launch (cudaMemsetAsync; the workspace is not zeroed).
#if defined(GLR_SM90_HOST_EMU)
__device__ __forceinline__ void group_fence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
__device__ __forceinline__ std::uint32_t group_ticket(std::uint32_t* p) { return std::atomic_ref<std::uint32_t>(*p).fetch_add(1u); }
__device__ __forceinline__ float4 group_load(const float* p) { return *reinterpret_cast<const float4*>(p); }
// The emulator's record of which value head of its group (j = hv % G, 0..7) finished each tile: the check asks that
// the last arriver varies (GLR_EMU_BLOCK_ORDER, tests/glr_sm90/emu.hpp), so a sum in arrival order would fail.
inline std::atomic<long> emu_group_last[8];
#else
__device__ __forceinline__ void group_fence() { __threadfence(); }
__device__ __forceinline__ std::uint32_t group_ticket(std::uint32_t* p) { return atomicAdd(p, 1u); }
__device__ __forceinline__ float4 group_load(const float* p) { return __ldcg(reinterpret_cast<const float4*>(p)); }
#endif
// The chunk kernels' (bx, by) when they sum the group (a.qkt set): the block's linear launch index L = by gx + bx,
// read so that the G value heads of one (chunk, q/k head) tile are consecutive (L = ((q H + h) gx + bx) G + j, by =
// q HV + h G + j, q the sequence row: dense the batch row, packed 0), so they run together and the last one's reads of
// the others' shares hit L2 (in the plain order they are gx blocks apart: at B1 T32768 HV32 512 blocks, ~4 waves).
// The same blocks, a permutation of the grid; G = 1: the identity.
__device__ __forceinline__ void group_order(const GdnBwdArgs& a, int& bx, int& by) {
  const int HV = a.value_heads(), G = HV / a.H;
  const std::uint32_t gx = gridDim.x;
  const std::uint32_t L = blockIdx.y * gx + blockIdx.x;  // the grid's blocks (< 2^32: each is 64 tokens of a value head)
  const std::uint32_t r = L / static_cast<std::uint32_t>(G), r2 = r / gx;
  bx = static_cast<int>(r - r2 * gx);
  by = static_cast<int>((r2 / static_cast<std::uint32_t>(a.H)) * HV + (r2 % static_cast<std::uint32_t>(a.H)) * G +
                        (L - r * static_cast<std::uint32_t>(G)));
}
// The block's own chunk (chunk_at), in group_order when a.qkt is set.
__device__ __forceinline__ bool chunk_at_grouped(const GdnBwdArgs& a, ChunkAt& p) {
  int bx = static_cast<int>(blockIdx.x), by = static_cast<int>(blockIdx.y);
  if (a.qkt != nullptr) group_order(a, bx, by);
  return chunk_at(a, bx, by, p);
}
// At the end of a chunk kernel's block (a.qkt set; kN threads, every one calling; flag: a shared word nothing else
// touches from here on): the ticket, and for the group's last block the sums (its len rows; float4 elements of K,
// as group_kernel's).
// The block's chunk is found again here (chunk_at_grouped) rather than held through the kernel from its start.
template <int kD, int kN>
__device__ __forceinline__ void group_sum_last(const GdnBwdArgs& a, int tid, std::uint32_t* flag) {
  ChunkAt at;
  chunk_at_grouped(a, at);  // (true: the block got past it at its start)
  const int HV = at.HV, G = HV / a.H;
  __syncthreads();  // every thread's shares stored; thread 0's fence below makes them visible before its ticket
  if (tid == 0) {
    const std::int64_t chunk = (at.R - static_cast<std::int64_t>(at.hv) * at.NT) / HV + at.t0 / C;  // sq.first + c
    group_fence();
    const bool last = group_ticket(a.qkt + chunk * a.H + at.h) == static_cast<std::uint32_t>(G - 1);
    group_fence();
    *flag = last ? 1u : 0u;
#if defined(GLR_SM90_HOST_EMU)
    if (last) ++emu_group_last[min(at.hv % G, 7)];
#endif
  }
  __syncthreads();
  if (*flag == 0u) return;
  const std::int64_t src0 = (at.trow * HV + static_cast<std::int64_t>(at.h) * G) * kD;
  const std::int64_t dst0 = (at.trow * a.H + at.h) * kD;
  const int n4 = at.len * (kD / 4);  // float4 elements of dq (and of dk) in the tile
  // kU elements a thread at once, each head's kU loads issued together (the partials sit in L2: ~kN kU 16 bytes in
  // flight a block; one at a time would leave the sum latency-bound), then added in head order into each element's
  // own accumulator: per element exactly group_kernel's p_0 + p_1 + ... + p_{G-1}.
  constexpr int kU = 8;
#pragma unroll 1
  for (int part = 0; part < 2; ++part) {  // dq, then dk
    const float* const src = part == 0 ? a.dqp : a.dkp;
    __nv_bfloat16* const dst = part == 0 ? a.dq : a.dk;
#pragma unroll 1
    for (int e0 = tid; e0 < n4; e0 += kN * kU) {
      std::int64_t off[kU];
      float4 s[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int e = min(e0 + u * kN, n4 - 1);  // (past the tile: element n4 - 1 again, not stored)
        off[u] = static_cast<std::int64_t>(e / (kD / 4)) * HV * kD + (e % (kD / 4)) * 4;
        s[u] = group_load(src + src0 + off[u]);
      }
#pragma unroll 1
      for (int gi = 1; gi < G; ++gi) {
        float4 x[kU];
#pragma unroll
        for (int u = 0; u < kU; ++u) x[u] = group_load(src + src0 + off[u] + static_cast<std::int64_t>(gi) * kD);
#pragma unroll
        for (int u = 0; u < kU; ++u) s[u] = make_float4(s[u].x + x[u].x, s[u].y + x[u].y, s[u].z + x[u].z, s[u].w + x[u].w);
      }
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int e = e0 + u * kN;
        if (e >= n4) break;
        std::uint32_t* o = reinterpret_cast<std::uint32_t*>(
            dst + dst0 + static_cast<std::int64_t>(e / (kD / 4)) * a.H * kD + (e % (kD / 4)) * 4);
        o[0] = pack_bf16x2(s[u].x, s[u].y);
        o[1] = pack_bf16x2(s[u].z, s[u].w);
      }
    }
  }
}

// <h, dh'> of row `row` of K, in column order (chunk(tile, row, c): the 16-byte chunk c, columns 8c..8c+7, of a
// (K x V) tile's row): store_phase2_partials' and ChunkWgCore::phase2's (which forms it during phase 2's first part).
template <int kD, class Chunk>
__device__ __forceinline__ float hdot_row(const __nv_bfloat16* h, const __nv_bfloat16* dh, int row, Chunk chunk) {
  float acc = 0.f;
#pragma unroll 4
  for (int cc = 0; cc < kD / 8; ++cc) {
    const uint4 x = *chunk(h, row, cc);
    const uint4 y = *chunk(dh, row, cc);
    const std::uint32_t xs[4] = {x.x, x.y, x.z, x.w}, ys[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const float2 xf = unpack_bf16x2(xs[w]), yf = unpack_bf16x2(ys[w]);
      acc = fmaf(xf.x, yf.x, acc);
      acc = fmaf(xf.y, yf.y, acc);
    }
  }
  return acc;
}

// After phase 2: its row dots rd[first .. last - 1] (0: dq's, 1 and 2: dk's) to shared memory (slot: as
// store_phase1_partials). The fused sweep stores dq's from one warpgroup and dk's from the other.
template <class Smem>
__device__ __forceinline__ void store_phase2_rows(Smem& s, const float (&rd)[3][2], int r0, int g8, int slot,
                                                  int first = 0, int last = 3) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = r0 + g8 + half * 8;
#pragma unroll
    for (int r = 0; r < 3; ++r)
      if (r >= first && r < last) s.rowp[2 + r][slot][i] = rd[r][half];
  }
}

// The same, then <h, dh'> of row hrow of K (hrow < kD; chunk_kernel and the fused kernel: hrow = tid, threads
// 0..kD - 1), in column order, chunk(tile, row, c) the 16-byte chunk c (columns 8c..8c+7) of a (K x V) tile's row.
// (The wgmma chunk kernels form <h, dh'> in phase 2's first part and store only the rows: ChunkWgCore::phase2.)
template <int kD, class Smem, class Chunk>
__device__ __forceinline__ void store_phase2_partials(Smem& s, const float (&rd)[3][2], int hrow, int r0, int g8, int slot,
                                                      Chunk chunk) {
  store_phase2_rows(s, rd, r0, g8, slot);
  if (hrow < kD) s.hdot[hrow] = hdot_row<kD>(s.h, s.dh, hrow, chunk);
}

// Phase 3 (after a barrier that makes phases 1 and 2's partials visible): per row (threads 0..63), then warp 0:
// the G_L terms and the reverse cumulative sum, lane l owning rows 63 - 2l and 62 - 2l, by an inclusive shuffle
// scan over the lanes (fixed order).
// sync: the barrier over the threads that run it (the chunk kernels' whole block: __syncthreads; the fused
// kernel's chunk warpgroup: a named barrier, gdn_bwd_fused.cuh).
struct BlockSync {
  __device__ __forceinline__ void operator()() const { __syncthreads(); }
};
template <int kD, bool kDelta, class Smem, class Sync = BlockSync>
__device__ __forceinline__ void chunk_phase3(Smem& s, const GdnBwdArgs& a, int tid, int len, int nsl, int HV,
                                             std::int64_t tok0, std::int64_t sl0, float GL, float GrL, Sync sync = {}) {
  const int warp = tid >> 5, lane = tid & 31;
  // Row partials per row: 4 (chunk_kernel: a quad's lanes) or 8 (chunk_wgmma_kernel: warpgroup 0's quad, then 1's),
  // summed in that fixed order.
  constexpr int kSlots = static_cast<int>(std::extent_v<std::remove_reference_t<decltype(Smem::rowp)>, 1>);
  static_assert(kSlots == 4 || kSlots == 8, "row partials: one quad or two warpgroups' quads");
  if (tid < C) {
    const int i = tid;
    auto quad = [&](int r) {
      const auto& p = s.rowp[r];
      float q = ((p[0][i] + p[1][i]) + p[2][i]) + p[3][i];
      if constexpr (kSlots == 8) q += ((p[4][i] + p[5][i]) + p[6][i]) + p[7][i];
      return q;
    };
    float colsum = 0.f;
#pragma unroll 8
    for (int w = 0; w < 32; ++w) colsum += s.colp[w][i];
    const float egi = gdn::exp_approx(s.G[i]), eli = gdn::exp_approx(GrL - s.Gr[i]);
    const float bt = kDelta ? s.beta[i] : 0.f;
    const float r2 = quad(3), t3 = eli * quad(4);
    // e^{G_L - G_i} gives -t3_i to dG_i and +t3_i to dG_L: in dg_j = sum_{m >= j} dG_m the two cancel for
    // j <= i, so t3_i is kept out of dG and added to dg_j for j > i only (an exclusive prefix sum below).
    // Exact either way, but NaN - NaN at j <= i for a non-finite V_new_i (a NaN or Inf in v_i), where the
    // exact dg_j does not depend on v_i (the state before token j does not contain it).
    if constexpr (kDelta)
      s.dG[i] = i < len ? a.scale * egi * quad(2) - bt * egi * r2 + (quad(0) - colsum) : 0.f;
    else  // no W: no beta e^G term (skipped, not multiplied by a zero beta: docs/glr-math.md section 7, item 3)
      s.dG[i] = i < len ? a.scale * egi * quad(2) + (quad(0) - colsum) : 0.f;
    s.t3[i] = i < len ? t3 : 0.f;
    if constexpr (kDelta) {
      float dbv = 0.f;
      for (int sl = 0; sl < nsl; ++sl) dbv += s.dbv[sl][i];
      if (i < len) store_scalar(a.dbeta, a.beta_bf16, tok0 + static_cast<std::int64_t>(i) * HV, quad(1) - egi * r2 + dbv);
    }
  }
  sync();
  if (warp == 0) {
    // extra = e^{G_L} <h, dh'> (lane partials, then the scan's last lane), added to dG_L; and the exclusive
    // prefix sums of t3 (lane l rows 2l, 2l + 1), written over t3: s.t3[j] = t3_0 + ... + t3_{j-1}.
    const float ta = s.t3[2 * lane], tb = s.t3[2 * lane + 1];
    float tp = ta + tb;
    constexpr int kRowsPerLane = kD / 32;  // hdot rows per lane, summed in ascending order
    float part = s.hdot[kRowsPerLane * lane];
#pragma unroll
    for (int j = 1; j < kRowsPerLane; ++j) part += s.hdot[kRowsPerLane * lane + j];
    part *= gdn::exp_approx(GL);
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const float y = __shfl_up_sync(0xffffffffu, part, off), z = __shfl_up_sync(0xffffffffu, tp, off);
      if (lane >= off) {
        part = y + part;
        tp = z + tp;
      }
    }
    float texcl = __shfl_up_sync(0xffffffffu, tp, 1);
    if (lane == 0) texcl = 0.f;
    // every lane has read its t3 and hdot above (the shuffles are warp-synchronous)
    s.t3[2 * lane] = texcl;
    s.t3[2 * lane + 1] = texcl + ta;
    if (lane == 31) s.hdot[0] = part;
    __syncwarp();
    const float extra = s.hdot[0];
    const int i0 = C - 1 - 2 * lane;
    const float x0 = s.dG[i0] + (lane == 0 ? extra : 0.f), x1 = s.dG[i0 - 1];
    const float2 sp = warp_scan_pairs(x0, x1, lane);  // (excl + x0, excl + x0 + x1)
    const float s0 = sp.x + s.t3[i0], s1 = sp.y + s.t3[i0 - 1];
    if (a.gate == 1) {  // gate 0 (DeltaNet, linear attention): no g, so no dg (dG is formed and dropped)
      if (i0 < len) store_scalar(a.dg, a.g_bf16, tok0 + static_cast<std::int64_t>(i0) * HV, s0);
      if (i0 - 1 < len) store_scalar(a.dg, a.g_bf16, tok0 + static_cast<std::int64_t>(i0 - 1) * HV, s1);
    } else if (a.gate == 2) {
      // One g per value head (RetNet): dg = the sum of every token's dg_t. This chunk's share, its tokens' dg_t in
      // ascending order (padding rows left out by the loop bound, not multiplied by 0), to the chunk slot's word
      // of a.dbv; dg_head_kernel sums the slots.
      __syncwarp();  // every lane has read its dG rows
      s.dG[i0] = s0;
      s.dG[i0 - 1] = s1;
      __syncwarp();
      if (lane == 0) {
        float sum = 0.f;
        for (int i = 0; i < len; ++i) sum += s.dG[i];
        a.dbv[sl0] = sum;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Kernel chunk: per (chunk, head), 4 warps, warp w rows 16w..16w+15 of every (C x *) tile.
//   Phase 1: Q K^T, dO V_new^T -> dA (bf16), dP . P;  K K^T, dX V_new^T -> E (bf16), D, dL . L (causal tiles).
//   Phase 2, per 64-column half of K: dq = scale e^G (dO h^T) + dA K;
//            dk = -beta e^G (dX h^T) + e^{G_L - G} (V_new dh'^T) + E K + E^T K + dA^T Q; the row dots for dG.
//   Phase 3: dG and dbeta per row (fixed-order sums of the partials), dg = reverse cumsum of dG (warp 0, scan).
template <int kD = gdn::DK>
struct ChunkSmem {
  static constexpr int kLd = kD + 8;  // row stride of the (C x K) and (K x V) tiles
  __nv_bfloat16 q[C * kLd];    // (C, K)
  __nv_bfloat16 k[C * kLd];    // (C, K)
  __nv_bfloat16 dO[C * kLd];   // (C, V)
  __nv_bfloat16 vn[C * kLd];   // (C, V) V_new
  __nv_bfloat16 vnl[C * kLd];  // (C, V) V_new - bf16(V_new) (for V_new dh'^T)
  __nv_bfloat16 dx[C * kLd];   // (C, V) dX
  __nv_bfloat16 h[kD * kLd];   // (K, V) state entering the chunk
  __nv_bfloat16 dh[kD * kLd];  // (K, V) gradient of the state leaving it
  __nv_bfloat16 dhl[C * kLd];  // (64, V) dh''s bf16 residual, the rows of one 64-row part of K at a time (phase 2)
  __nv_bfloat16 dA[C * LD64];    // (C, C) scale tril(Gamma . dP)
  __nv_bfloat16 E[C * LD64];     // (C, C) strictly_lower(beta . Gamma . dL)
  float G[C];
  float Gr[C];
  float beta[C];
  float dbv[8][C];      // rowsum(dX . V) per column slice of the dh kernel (kD / vt of them)
  RowPartials<4> rowp;  // row partials per lane of a quad: M, D, Q.(dO h^T), K.(dX h^T), K.(V_new dh'^T)
  ColPartials colp;     // column partials of M: [warp * 8 + row group][column]
  float hdot[kD];       // <h, dh'> per row
  float dG[C];
  float t3[C];
};

static_assert(sizeof(ChunkSmem<128>) <= 227 * 1024, "the chunk kernel's shared memory fits one block per SM (227 KB)");

template <int kD = gdn::DK, bool kDelta = true>
__global__ void __launch_bounds__(kThreads, 1) chunk_kernel(const __grid_constant__ GdnBwdArgs a) {
  static_assert(kD == 64 || kD == 128, "K = V = 64 or 128");
  constexpr int kLd = kD + 8, KH = kD / 64;  // row stride of the tiles; 64-column parts of K (phase 2)
  extern __shared__ __align__(16) char smem_raw[];
  ChunkSmem<kD>& s = *reinterpret_cast<ChunkSmem<kD>*>(smem_raw);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g8 = lane >> 2, t4 = lane & 3, r0 = warp * 16;
  ChunkAt at;
  if (!chunk_at_grouped(a, at)) return;
  const int HV = at.HV, NT = at.NT, t0 = at.t0, len = at.len;
  const std::int64_t R = at.R, sl0 = at.sl0, qtok0 = at.qtok0, tok0 = at.tok0;
  const std::int64_t row_stride = static_cast<std::int64_t>(a.H) * kD;

  // Group 1: q, k, dO, V_new, G, beta, the dbeta partials (phase 1's first pass). Group 2: dX (its second pass).
  // Group 3: h, dh', the residuals of V_new and of dh''s first 64 rows (phase 2).
  load_tile<kD>(s.q, a.q + qtok0 * kD, row_stride, len, tid);
  load_tile<kD>(s.k, a.k + qtok0 * kD, row_stride, len, tid);
  load_tile<kD>(s.dO, a.dout + tok0 * kD, static_cast<std::int64_t>(HV) * kD, len, tid);
  if constexpr (kDelta)
    load_tile<kD>(s.vn, a.vn + sl0 * C * kD, kD, C, tid);
  else  // no delta rule: V_new = V, read from v (the padding rows zero)
    load_tile<kD>(s.vn, a.v + tok0 * kD, static_cast<std::int64_t>(HV) * kD, len, tid);
  const int nsl = kD / a.vt;  // 2, 4 or 8 slices of 16 pieces
  load_chunk_scalars<kDelta>(s, a, tid, R, sl0, nsl, NT, t0);
  cp_async_commit();
  if constexpr (kDelta) load_tile<kD>(s.dx, a.dx + sl0 * C * kD, kD, C, tid);
  cp_async_commit();  // (empty without the delta rule: the wait counts below stay the same)
  {
    const std::int64_t o = sl0 * kD * kD;
#pragma unroll
    for (int kh = 0; kh < KH; ++kh) {  // (kD x kD): KH tiles of 64 rows
      load_tile<kD>(s.h + kh * C * kLd, a.hc + o + kh * C * kD, kD, C, tid);
      load_tile<kD>(s.dh + kh * C * kLd, a.dhc + o + kh * C * kD, kD, C, tid);
    }
    if constexpr (kDelta) load_tile<kD>(s.vnl, a.vnl + sl0 * C * kD, kD, C, tid);  // V exact in bf16 without it
    load_tile<kD>(s.dhl, a.dhcl + o, kD, C, tid);  // rows 0..63; 64..127 (kD = 128) once phase 2's first half is done
  }
  cp_async_commit();
  cp_async_wait<2>();
  __syncthreads();

  // Decays between two tokens (Gamma, e^{G_L - G_i}) come from Gr, never from G: with the chunk's first gate g_0
  // NaN, G_i - G_j is NaN - NaN, Gr_i - Gr_j the finite g_{j+1} + ... + g_i (docs/glr-math.md section 7). G itself
  // only for the state entering the chunk (e^{G_i}, e^{G_L}).
  const float GL = s.G[C - 1], GrL = s.Gr[C - 1];
  // Phase 1. Row partials (per thread, its two rows) and column partials (its 16 columns, both rows).
  Phase1Partials p1;
  for (int pass = 0; pass < (kDelta ? 2 : 1); ++pass) {
    // pass 0: x = Q K^T, y = dO V_new^T;  pass 1: x = K K^T, y = dX V_new^T (= -dL; the delta rule only)
    if (pass == 1) {
      cp_async_wait<1>();  // dX
      __syncthreads();
    }
    const __nv_bfloat16* xa = pass == 0 ? s.q : s.k;
    const __nv_bfloat16* ya = pass == 0 ? s.dO : s.dx;
    float x[8][4], y[8][4];
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) x[n][e] = y[n][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
      std::uint32_t ax[4], ay[4];
      ldsm_a(ax, xa, kLd, r0, ks * 16, lane);
      ldsm_a(ay, ya, kLd, r0, ks * 16, lane);
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        if (np <= warp) {  // causal: column tiles j < r0 + 16
          std::uint32_t bk[4], bv[4];
          ldsm_b_nk(bk, s.k, kLd, np * 16, ks * 16, lane);
          ldsm_b_nk(bv, s.vn, kLd, np * 16, ks * 16, lane);
          mma_bf16_16816(x[2 * np], ax, bk[0], bk[1]);
          mma_bf16_16816(x[2 * np + 1], ax, bk[2], bk[3]);
          mma_bf16_16816(y[2 * np], ay, bv[0], bv[1]);
          mma_bf16_16816(y[2 * np + 1], ay, bv[2], bv[3]);
        }
      }
    }
    phase1_epilogue(s, a, pass, len, r0, g8, t4, x, y, p1, [](__nv_bfloat16* t, int i, int col) {
      return reinterpret_cast<std::uint32_t*>(t + i * LD64 + col);
    });
  }
  store_phase1_partials(s, p1, warp, g8, t4);
  cp_async_wait<0>();
  __syncthreads();  // dA, E, h, dh' visible

  // Phase 2, per 64-column part of K (two at kD = 128, one at 64).
  float rd[3][2] = {{0.f, 0.f}, {0.f, 0.f}, {0.f, 0.f}};  // Q.(dO h^T), K.(dX h^T), K.(V_new dh'^T), per row
  // A2, B2 (bf16 residuals of A and of Bs' rows n0..n0+63), each if not null: acc = A2 Bs^T + A B2^T + A Bs^T.
  auto rows_times = [&](float (&acc)[8][4], const __nv_bfloat16* A, const __nv_bfloat16* Bs, int n0,
                        const __nv_bfloat16* A2 = nullptr, const __nv_bfloat16* B2 = nullptr) {
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[n][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
      std::uint32_t af[4], af2[4];
      ldsm_a(af, A, kLd, r0, ks * 16, lane);
      if (A2) ldsm_a(af2, A2, kLd, r0, ks * 16, lane);
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        std::uint32_t bf[4];
        ldsm_b_nk(bf, Bs, kLd, n0 + np * 16, ks * 16, lane);
        if (A2) {
          mma_bf16_16816(acc[2 * np], af2, bf[0], bf[1]);
          mma_bf16_16816(acc[2 * np + 1], af2, bf[2], bf[3]);
        }
        if (B2) {
          std::uint32_t bl[4];
          ldsm_b_nk(bl, B2, kLd, np * 16, ks * 16, lane);
          mma_bf16_16816(acc[2 * np], af, bl[0], bl[1]);
          mma_bf16_16816(acc[2 * np + 1], af, bl[2], bl[3]);
        }
        mma_bf16_16816(acc[2 * np], af, bf[0], bf[1]);
        mma_bf16_16816(acc[2 * np + 1], af, bf[2], bf[3]);
      }
    }
  };
  // acc += (A or A^T) Bm over the C inner index, A a (C x C) shared tile, Bm a (C x K) one; kTrans: A^T.
  auto cc_times = [&](float (&acc)[8][4], const __nv_bfloat16* A, bool trans, const __nv_bfloat16* Bm, int n0) {
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      if (trans ? ks >= warp : ks <= warp) {
        std::uint32_t af[4];
        if (trans)
          ldsm_a_trans(af, A, LD64, r0, ks * 16, lane);
        else
          ldsm_a(af, A, LD64, r0, ks * 16, lane);
#pragma unroll
        for (int np = 0; np < 4; ++np) {
          std::uint32_t bf[4];
          ldsm_b_kn(bf, Bm, kLd, ks * 16, n0 + np * 16, lane);
          mma_bf16_16816(acc[2 * np], af, bf[0], bf[1]);
          mma_bf16_16816(acc[2 * np + 1], af, bf[2], bf[3]);
        }
      }
    }
  };
  auto row_dot = [&](float (&r)[2], const float (&acc)[8][4], const __nv_bfloat16* X, int n0) {
    add_row_dot(r, acc, r0, g8, t4, n0, [&](int i, int col) { return reinterpret_cast<const std::uint32_t*>(X + i * kLd + col); });
  };
  auto store_rows = [&](__nv_bfloat16* dst, float* dst32, const float (&acc)[8][4], int n0) {
    store_qk_rows<kD>(a, dst, dst32, acc, n0, len, HV, qtok0, tok0, r0, g8, t4);
  };
  float eg[2], bi[2], el[2];
  phase2_row_factors<kDelta>(s, r0, g8, GrL, eg, bi, el);
#pragma unroll 1
  for (int kh = 0; kh < KH; ++kh) {
    const int n0 = kh * 64;
    float acc[8][4], out[8][4];
    if (kh == 1) {
      cp_async_wait<0>();
      __syncthreads();  // dh''s residual, rows 64..127, visible
    }
    // dk, its V_new dh'^T term first (three pieces: h_kernel's phase B says why), which frees s.dhl for the next half
    rows_times(acc, s.vn, s.dh, n0, kDelta ? s.vnl : nullptr, s.dhl);  // V_new = V is exact in bf16 without delta
    row_dot(rd[2], acc, s.k, n0);
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) out[n][e] = el[e >> 1] * acc[n][e];
    if (kh + 1 < KH) {
      __syncthreads();  // every warp is done with rows 0..63 of the residual
      load_tile<kD>(s.dhl, a.dhcl + sl0 * kD * kD + C * kD, kD, C, tid);
      cp_async_commit();
    }
    if constexpr (kDelta) {  // the terms through W and L (X = beta V - beta e^G K h, T = (I + L)^-1)
      rows_times(acc, s.dx, s.h, n0);
      row_dot(rd[1], acc, s.k, n0);
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) out[n][e] = fmaf(-bi[e >> 1] * eg[e >> 1], acc[n][e], out[n][e]);
      cc_times(out, s.E, false, s.k, n0);
      cc_times(out, s.E, true, s.k, n0);
    }
    cc_times(out, s.dA, true, s.q, n0);
    store_rows(a.dk, a.dkp, out, n0);
    // dq
    rows_times(acc, s.dO, s.h, n0);
    row_dot(rd[0], acc, s.q, n0);
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) out[n][e] = a.scale * eg[e >> 1] * acc[n][e];
    cc_times(out, s.dA, false, s.k, n0);
    store_rows(a.dq, a.dqp, out, n0);
  }
  store_phase2_partials<kD>(s, rd, tid, r0, g8, t4, [&](const __nv_bfloat16* t, int r, int cc) {
    return reinterpret_cast<const uint4*>(t + r * kLd + cc * 8);
  });
  __syncthreads();
  chunk_phase3<kD, kDelta>(s, a, tid, len, nsl, HV, tok0, sl0, GL, GrL);
  // GVA: the group's last block sums its dq, dk (t3 is free past group_sum_last's first barrier)
  if (a.qkt != nullptr) group_sum_last<kD, kThreads>(a, tid, reinterpret_cast<std::uint32_t*>(s.t3));
}

// ---------------------------------------------------------------------------------------------------------
// Kernel group (HV > H only): dq and dk of q/k head h are the sums of the fp32 shares of its value heads
// h G .. h G + G - 1 (G = HV / H), added in ascending value-head order, then rounded once to bf16: the block
// programs' group_reduce, whose sum starts at 0 (the same value; only a -0 sum there reads +0). No atomics.
// 4 consecutive elements of K a thread, a grid-stride loop.
template <int kD = gdn::DK>
__global__ void __launch_bounds__(kThreads) group_kernel(const __grid_constant__ GdnBwdArgs a) {
  const int HV = a.value_heads(), G = HV / a.H;
  const std::int64_t n4 = static_cast<std::int64_t>(a.B) * a.T * a.H * (kD / 4);
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x; e < n4;
       e += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    const std::int64_t rh = e / (kD / 4), d = (e % (kD / 4)) * 4;  // rh = (b T + t) H + h
    const std::int64_t src = ((rh / a.H) * HV + (rh % a.H) * G) * kD + d;
    float4 q = *reinterpret_cast<const float4*>(a.dqp + src), k = *reinterpret_cast<const float4*>(a.dkp + src);
    for (int gi = 1; gi < G; ++gi) {
      const float4 x = *reinterpret_cast<const float4*>(a.dqp + src + static_cast<std::int64_t>(gi) * kD);
      const float4 y = *reinterpret_cast<const float4*>(a.dkp + src + static_cast<std::int64_t>(gi) * kD);
      q = make_float4(q.x + x.x, q.y + x.y, q.z + x.z, q.w + x.w);
      k = make_float4(k.x + y.x, k.y + y.y, k.z + y.z, k.w + y.w);
    }
    std::uint32_t* dq = reinterpret_cast<std::uint32_t*>(a.dq + rh * kD + d);
    std::uint32_t* dk = reinterpret_cast<std::uint32_t*>(a.dk + rh * kD + d);
    dq[0] = pack_bf16x2(q.x, q.y);
    dq[1] = pack_bf16x2(q.z, q.w);
    dk[0] = pack_bf16x2(k.x, k.y);
    dk[1] = pack_bf16x2(k.z, k.w);
  }
}

// Kernel dg_head (gate 2, one g per value head: RetNet): dg[hv] = the sum over every chunk of every sequence of the
// chunk kernel's per-chunk shares (a.dbv, one word per chunk slot), in a fixed order: thread t sums the chunks
// t, t + 128, ... of the batch's chunk numbering (dense: sequence-major; packed: the chunk table's), then a fixed
// tree over the 128 partials. Grid (HV). No chunks (T = 0): dg = 0. Invalid packed offsets: nothing (poison kernel).
inline constexpr int dg_head_smem_bytes = kThreads * 4;
static __global__ void __launch_bounds__(kThreads) dg_head_kernel(const __grid_constant__ GdnBwdArgs a) {
  extern __shared__ __align__(16) char smem_raw[];
  float* part = reinterpret_cast<float*>(smem_raw);  // kThreads partials (dg_head_smem_bytes)
  if (bad_offsets(a)) return;
  const int hv = blockIdx.x, tid = threadIdx.x, HV = a.value_heads();
  const int nt = (a.T + C - 1) / C;
  const long long total = a.varlen() ? a.table[1] : static_cast<long long>(nt) * a.B;
  float sum = 0.f;
  for (long long gc = tid; gc < total; gc += kThreads) {
    std::int64_t slot;
    if (!a.varlen()) {
      const long long n = gc / nt, c = gc % nt;
      slot = (n * HV + hv) * nt + c;
    } else {
      const Seq sq = sequence(a, a.table[kFirst + a.N + 1 + gc]);
      slot = first_slot(a, sq, hv) + (gc - sq.first);
    }
    sum += a.dbv[slot];
  }
  part[tid] = sum;
  __syncthreads();
#pragma unroll
  for (int w = kThreads / 2; w > 0; w >>= 1) {
    if (tid < w) part[tid] = part[tid] + part[tid + w];
    __syncthreads();
  }
  if (tid == 0) store_scalar(a.dg, a.g_bf16, hv, part[0]);
}

// Packed sequences whose offsets the chunk table kernel found invalid (table[0] = 1): every element of every output
// NaN (dq, dk, dv, dg, dbeta, dh0), as the block programs' poison stage; nothing else ran. Launched last; does
// nothing for valid offsets.
static __global__ void __launch_bounds__(kThreads) poison_kernel(const __grid_constant__ GdnBwdArgs a) {
  if (a.table[0] == 0) return;
  const int HV = a.value_heads();
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kThreads;
  const std::int64_t i0 = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  auto fill = [&](void* p, bool bf16, std::int64_t n) {
    if (p == nullptr) return;
    for (std::int64_t i = i0; i < n; i += stride) {
      if (bf16)
        static_cast<std::uint16_t*>(p)[i] = 0xffffu;
      else
        static_cast<std::uint32_t*>(p)[i] = 0xffffffffu;
    }
  };
  const std::int64_t T = a.T, D = a.D;  // K = V
  fill(a.dq, true, T * a.H * D);
  fill(a.dk, true, T * a.H * D);
  fill(a.dv, true, T * HV * D);
  if (a.gate != 0) fill(a.dg, a.g_bf16, a.gate == 2 ? HV : T * HV);
  if (a.delta) fill(a.dbeta, a.beta_bf16, T * HV);
  fill(a.dh0, false, static_cast<std::int64_t>(a.N) * HV * D * D);
}

}  // namespace gdn_bwd

// The launchers: nvcc's, and the host emulator's (GLR_SM90_EMU_LAUNCHERS: glr/cuda/sm90/emu/sm90_emu.hpp), one
// sequence of launches for both (launch_kernel and emu_smem, mma_sync.cuh: one emulated shared memory for the
// forward's kernels and these).
#if defined(__CUDACC__) || defined(GLR_SM90_EMU_LAUNCHERS)
namespace gdn_bwd {
// The chunk kernel's arguments c when it is chunk_kernel or chunk_wgmma_kernel: with HV > H and the tickets carved
// (a.qkt) and GLR_BWD_GROUP_KERNEL unset or 0, the tickets zeroed on `stream` and set in c (the kernel sums each group's
// dq, dk itself: group_sum_last); else c.qkt stays null (group_kernel runs after it).
inline cudaError_t chunk_group_args(const GdnBwdArgs& a, GdnBwdArgs& c, cudaStream_t stream) {
  if (a.value_heads() <= a.H || a.qkt == nullptr || bwd_group_kernel()) return cudaSuccess;
  c.qkt = a.qkt;
  return cudaMemsetAsync(a.qkt, 0, static_cast<std::size_t>(a.chunk_slots()) * a.H * 4, stream);
}
// prefetch (GLR_DH_PREFETCH=1): its prefetching schedule where it takes the case (dh_prefetch_takes: 64 columns, the
// delta rule).
// kEsOnly: dh_wgmma_kernel's Es-only mode (the split pass's pass A' under the fused sweep: launch_dh_ends<.., true>).
template <int kVT, int kD, bool kDelta, bool kSplit = false, bool kEsOnly = false>  // dh_wgmma_kernel's launch (gdn_bwd_dh_wgmma.cuh, below)
inline cudaError_t launch_dh_wgmma(const GdnBwdArgs& a, dim3 grid, cudaStream_t stream, char* emu_smem,
                                   bool prefetch = bwd_dh_prefetch());
// dh2_kernel (gdn_bwd_dh2.cuh, included below; GLR_DH_2GEMM=1): the unsplit dh pass at 64-column slices with the
// delta rule, K = V = 64 or 128; its grid is dh_wgmma_kernel's, 256 threads a block.
template <int kVT, int kD, bool kDelta>
inline constexpr bool dh2_takes = kVT == 64 && kDelta && (kD == 64 || kD == 128);
template <int kD>
inline cudaError_t launch_dh2(const GdnBwdArgs& a, dim3 grid, cudaStream_t stream, char* emu_smem);
// The h pass alone (a with T > 0; a.segs > 1: split): the forward's passes A and B (gdn::launch_split_ab), then
// h_kernel over every segment. wgmma (GLR_H_WGMMA=1 in launch_state_passes; kVT = 64 only, else h_kernel): pass A
// on state_t_wgmma_kernel<.., true> whatever GLR_FWD_WGMMA says, and the h kernel as its kHPass mode (gdn_state_wgmma.cuh;
// not yet run on a GPU). The same outputs (h_c, V_new, its residual where a.vn is set: vnew_stored; Es), to rounding.
// prefetch (GLR_H_PREFETCH=1, bwd_h_prefetch): h_kernel in its prefetching schedule where h_prefetch_takes.
template <int kVT, int kD, bool kDelta>
inline cudaError_t launch_h_pass(const GdnBwdArgs& a, cudaStream_t stream, bool wgmma, bool prefetch = bwd_h_prefetch()) {
  const unsigned rows = static_cast<unsigned>(seg::rows(a) * a.value_heads());  // segment rows x HV
  const GdnFwdArgs f = wy_args(a);
  cudaError_t e = cudaSuccess;
  if constexpr (kVT == 64) {
    if (wgmma) {
      if (seg::split(a) && (e = gdn::launch_split_ab<kDelta, kD>(f, stream, true)) != cudaSuccess) return e;
      gdn::StateHArgs h;
      static_cast<GdnFwdArgs&>(h) = f;
      h.status = nullptr;  // (the forward's dense blocks clear it; here the chunk table kernel's verdict, packed only)
      h.hc = a.hc;
      h.vn = a.vn;
      h.vnl = a.vnl;
      return gdn::launch_state_t_wgmma<kDelta, kD, true, true>(h, stream);
    }
  }
  if (seg::split(a) && (e = gdn::launch_split_ab<kDelta, kD>(f, stream)) != cudaSuccess) return e;
  auto h = [&](auto vnew_out) {  // h_kernel with V_new's stores (kVnewOut) or without
    constexpr bool kOut = decltype(vnew_out)::value;
    if constexpr (h_prefetch_takes<kVT, kD, kDelta>)
      if (prefetch)
        return launch_kernel(&h_kernel<kVT, kD, true, true, kOut>, dim3(kD / kVT, rows), kThreads,
                             sizeof(HPipeSmem<kVT, kD>), stream, a, emu_smem);
    return launch_kernel(&h_kernel<kVT, kD, kDelta, false, kOut>, dim3(kD / kVT, rows), kThreads, sizeof(HSmem<kVT, kD>),
                         stream, a, emu_smem);
  };
  // a.vn null (vnew_stored false: the fused sweep takes the backward, K = V = 128 only): no V_new stores
  if constexpr (kDelta && kD == 128)
    if (!a.vn) return h(std::false_type{});
  return h(std::bool_constant<kDelta>{});
}
// The h and dh kernels for one slice width (their shared-memory limits: launch_kernel's, mma_sync.cuh).
// seg::split(a) (gdn_bwd_split_plan; segments by length, segments.cuh: the h kernel's grid rows the segment rows,
// every segment from the state entering it):
//   h pass: the forward's split pass's passes A and B (gdn::launch_split_ab on wy_args(a): state_t_kernel<.., true>
//     at 64 columns leaves each segment's end state from 0 (segment 0 from h0) and its map M_s, combine_kernel makes
//     Es slot s the state entering segment s + 1), then the h kernel over every segment at once (its pass C).
//   dh pass (the adjoint: dh_c = A_c^T dh_{c+1} + b_c, A_c the forward's map, so M_s^T carries a gradient across
//     segment s; a.dh_split, else the dh pass runs unsplit): pass A', the dh kernel over the split sequences'
//     segments 1 .. nseg - 1 from 0 (the last from dht; grid rows the Es slots), each leaving the gradient entering
//     it in the Es slot of segment s - 1 (the h pass is done with Es), and writing every output of its chunks; the
//     reverse combine (combine_kernel<.., kReverse>) makes the Es slot of segment s the gradient leaving it; pass C,
//     the dh kernel over the segment rows from those slots (whole sequences from dht), overwrites their outputs and
//     writes dh0. The last segment of a split sequence is already whole from pass A' (from dht): pass C skips it.
// Pass A (forward) and A' each cover only the split sequences; pass C all. (GLR_FUSED_BWD=1: launch_fused_bwd runs the
// h pass, pass A' (in its Es-only mode: launch_dh_ends<.., true>) and the reverse combine the same way, then the fused
// sweep in pass C's place and the chunk kernel's.) The dh kernel: dh_wgmma_kernel<.., true>
// (GLR_DH_WGMMA unset or 1) or dh_kernel, the same segments (on the H200, B1 T32768 H16: split in 8 with dh_kernel
// 1.65 ms against 2.38 unsplit on wgmma; dh_wgmma_kernel split not yet run on a GPU).
// GLR_H_WGMMA=1: the h pass on wgmma at 64-column slices (launch_h_pass). dh_prefetch (GLR_DH_PREFETCH=1,
// bwd_dh_prefetch): dh_wgmma_kernel, split or not, in its prefetching schedule where dh_prefetch_takes.
// One split dh pass over `rows` grid rows (pass A': x.dh_ends; pass C: x.dh_skip_last): on wgmma by default
// (dh_wgmma_kernel<.., true>; GLR_DH_WGMMA=0: dh_kernel).
template <int kVT, int kD, bool kDelta>
inline cudaError_t launch_split_dh(const GdnBwdArgs& x, unsigned rows, cudaStream_t stream, bool dh_prefetch) {
  const dim3 g(kD / kVT, rows);
  return bwd_dh_wgmma(true)
             ? launch_dh_wgmma<kVT, kD, kDelta, true>(x, g, stream, emu_smem, dh_prefetch)
             : launch_kernel(&dh_kernel<kVT, kD, kDelta>, g, kThreads, sizeof(DhSmem<kVT, kD>), stream, x, emu_smem);
}
// The split dh pass's pass A' (the dh kernel over the Es slots, each running the segment after its own from 0, the
// last from dht) and the reverse combine: the Es slot of segment s then holds the gradient leaving it (pass C's, or
// the fused sweep's, blocks start there). a split (seg::split(a), a.dh_split), after the h pass.
// kEsOnly (the fused sweep's, launch_fused_bwd): pass A' stores the Es slots alone (dh_wgmma_kernel's Es-only mode,
// whatever GLR_DH_WGMMA says: the sweep's dh chain is dh_wgmma_kernel's, and dh_kernel's Es are the same words but
// where a NaN or Inf in dO spreads, gdn_bwd_dh_wgmma.cuh) and no dv, dX, dh', its residual or dbeta partials, which
// the sweep forms itself (the workspace carves none of them there: chunk_inputs_stored).
template <int kVT, int kD, bool kDelta, bool kEsOnly = false>
inline cudaError_t launch_dh_ends(const GdnBwdArgs& a, cudaStream_t stream, bool dh_prefetch) {
  GdnBwdArgs d = a;
  d.dh_ends = true;
  const unsigned rows = static_cast<unsigned>(seg::slots(a)) * a.HV;
  cudaError_t e = cudaSuccess;
  if constexpr (kEsOnly)
    e = launch_dh_wgmma<kVT, kD, kDelta, true, true>(d, dim3(kD / kVT, rows), stream, emu_smem, dh_prefetch);
  else
    e = launch_split_dh<kVT, kD, kDelta>(d, rows, stream, dh_prefetch);
  return e != cudaSuccess ? e : gdn::launch_combine<kD, kDelta, true>(wy_args(a), stream);
}
template <int kVT, int kD, bool kDelta>
inline cudaError_t launch_state_passes(const GdnBwdArgs& a, cudaStream_t stream, cudaEvent_t* marks,
                                       bool dh_prefetch = bwd_dh_prefetch()) {
  cudaError_t e = cudaSuccess;
  const int NT = (a.T + C - 1) / C;
  const unsigned heads = static_cast<unsigned>(a.num_seqs() * a.value_heads());  // grid rows per segment
  const dim3 grid(kD / kVT, heads);  // (slice, sequence x value head)
  const bool split = NT > 0 && seg::split(a);
  GdnBwdArgs h = a;
  if (!split) h.segs = 1;  // (no chunks: the h pass unsplit)
  if (NT > 0 && (e = launch_h_pass<kVT, kD, kDelta>(h, stream, bwd_h_wgmma())) != cudaSuccess) return e;
  if (marks && (e = cudaEventRecord(marks[1], stream)) != cudaSuccess) return e;
  GdnBwdArgs d = a;
  if (!split || !a.dh_split) {  // unsplit: dh_kernel by default (GLR_DH_WGMMA=1: on wgmma; env_switch.hpp)
    d.segs = 1;
    if constexpr (dh2_takes<kVT, kD, kDelta>)
      if (bwd_dh_2gemm()) return launch_dh2<kD>(d, grid, stream, emu_smem);  // GLR_DH_2GEMM=1 (gdn_bwd_dh2.cuh)
    return bwd_dh_wgmma(false)
               ? launch_dh_wgmma<kVT, kD, kDelta>(d, grid, stream, emu_smem, dh_prefetch)
               : launch_kernel(&dh_kernel<kVT, kD, kDelta>, grid, kThreads, sizeof(DhSmem<kVT, kD>), stream, d, emu_smem);
  }
  // pass A' and the reverse combine, then pass C over the segment rows but the last segments of split sequences
  // (their pass A' run started from dht: already whole); the segment table is the h pass's.
  if ((e = launch_dh_ends<kVT, kD, kDelta>(a, stream, dh_prefetch)) != cudaSuccess) return e;
  d.dh_skip_last = true;  // pass C
  return launch_split_dh<kVT, kD, kDelta>(d, static_cast<unsigned>(seg::rows(a)) * a.HV, stream, dh_prefetch);
}
}  // namespace gdn_bwd

// The slice width of the h and dh kernels: the widest (64, 32, 16 columns) that still gives every multiprocessor
// a block (BH DV / vt >= SMs, BH the sequences x value heads, times the segments when split); 16 below that (B1
// T32768 H16: 128 blocks instead of 32; in 8 segments 64 columns, 256 blocks). The rule is the forward's too:
// state_slice_width (state_slice.cuh).
inline int gdn_bwd_slice_width(int BH, int D = gdn::DV) { return state_slice_width(BH, D); }

#endif  // __CUDACC__ || GLR_SM90_EMU_LAUNCHERS

// Why gdn_bwd_mma would refuse a, or null if it takes it: T >= 0, B, H >= 1, D (K = V) 64 or 128, B H <= 65535
// (packed: B = 1, one offset array, N HV <= 65535), gate 0, 1 or 2 (2 only without the delta rule), every
// tensor present that the member reads or writes, 16-byte aligned q, k, v, dout; 4-byte aligned dq, dk, dv; g,
// beta, dg, dbeta aligned to their elements (4 bytes fp32, 2 bf16); 8-byte aligned h0, dht, dh0; the workspace carved (gdn_bwd_workspace_carve) from a 16-byte
// aligned block. Shared by gdn_bwd_mma and glr's dispatch (glr/cuda/sm90/backward.cu).
inline const char* gdn_bwd_mma_refusal(const GdnBwdArgs& a) {
  auto misaligned = [](const void* p, std::uintptr_t n) { return reinterpret_cast<std::uintptr_t>(p) % n != 0; };
  if (a.B < 1 || a.H < 1 || a.T < 0) return "sizes (B, H >= 1, T >= 0)";
  if (a.D != 64 && a.D != 128) return "head dims (K = V = 64 or 128)";
  if (a.HV != 0 && (a.HV < a.H || a.HV % a.H != 0)) return "HV a multiple of H (or 0: H)";
  if (a.varlen() && (a.B != 1 || (!a.cu_seqlens) == (!a.cu_seqlens32) || a.chunk_slots() > 0x7fffffffLL))
    return "packed sequences need B = 1 and one offset array";
  if (static_cast<long long>(a.num_seqs()) * a.value_heads() > 65535)
    return a.varlen() ? "sequences x HV > 65535" : "B HV > 65535";
  if (a.segs < 1 || a.seg_len < 1 || a.dh_ends || a.dh_skip_last)
    return "split state pass segments (segs, seg_len >= 1; dh_ends, dh_skip_last are the launcher's)";
  if (seg::rows(a) * a.value_heads() > 65535 || seg::slots(a) * a.value_heads() > 65535)
    return "split segments (or slots) x HV > 65535";
  if (a.gate < 0 || a.gate > 2) return "gate (0: none, 1: per token, 2: per head)";
  if (a.gate == 2 && a.delta) return "a per-head gate (2) only without the delta rule";
  if (!a.q || !a.k || !a.v || (a.gate != 0 && (!a.g || !a.dg)) || (a.delta && (!a.beta || !a.dbeta)) || !a.dout ||
      !a.dq || !a.dk || !a.dv)
    return "a null tensor";
  if (misaligned(a.q, 16) || misaligned(a.k, 16) || misaligned(a.v, 16) || misaligned(a.dout, 16) ||
      misaligned(a.dq, 4) || misaligned(a.dk, 4) || misaligned(a.dv, 4) || misaligned(a.g, a.g_bf16 ? 2 : 4) ||
      misaligned(a.beta, a.beta_bf16 ? 2 : 4) || misaligned(a.dg, a.g_bf16 ? 2 : 4) ||
      misaligned(a.dbeta, a.beta_bf16 ? 2 : 4) || misaligned(a.h0, 8) || misaligned(a.dht, 8) || misaligned(a.dh0, 8))
    return "alignment (q, k, v, dout 16 bytes; dq, dk, dv 4; g, beta, dg, dbeta their element; h0, dht, dh0 8)";
  // the chunk kernels' inputs only where the rule carves them (chunk_inputs_stored; vnew_stored): a kernel reads each there
  const bool chunk_in = chunk_inputs_stored(a);
  if (!a.G || !a.Gr || !a.hc || (chunk_in && (!a.dhc || !a.dhcl)) ||
      (a.delta && (!a.Tm || !a.Bc || (chunk_in && !a.dx))) || (vnew_stored(a) && (!a.vn || !a.vnl)) ||
      ((a.delta || a.gate == 2) && chunk_in && !a.dbv) ||
      misaligned(a.Tm, 16) || misaligned(a.hc, 16) || misaligned(a.dhc, 16) || misaligned(a.dhcl, 16) || misaligned(a.vn, 16) || misaligned(a.vnl, 16) || misaligned(a.dx, 16) ||
      misaligned(a.G, 16) || misaligned(a.Bc, 16) || misaligned(a.Gr, 16) || misaligned(a.dbv, 16) ||
      (a.value_heads() > a.H && (!a.dqp || !a.dkp || misaligned(a.dqp, 16) || misaligned(a.dkp, 16))) ||
      (a.varlen() && (!a.table || !a.status || misaligned(a.table, 16))) ||
      (seg::split(a) && (!a.Es || misaligned(a.Es, 16) || (a.delta && (!a.Ms || misaligned(a.Ms, 16))) ||
                         (a.varlen() && !a.segtab))))
    return "workspace (carve it with gdn_bwd_workspace_carve, a.segs and a.seg_len set)";
  return nullptr;
}

// The split state passes' segments (launch_state_passes): the forward's rule (split_segments, gdn_fwd_mma.cuh:
// only where the unsplit pass gives at most half the multiprocessors a 64-column block, segments of at least
// kSplitMinChunks chunks) on the same shapes, through wy_args; packed sequences split as the forward's do (by the
// average sequence). B1 T32768 H16 on 132 SMs: 8; HV32: 4; B8 T4096 H16: 1. a's sizes (B, T, H, HV, N, D) set.
inline int gdn_bwd_split_segments(const GdnBwdArgs& a, int sms) { return gdn_fwd_split_segments(gdn_bwd::wy_args(a), sms); }
// The split by length (gdn_fwd_split_plan: segments.cuh, the cost model there) for the h pass, which reuses the
// forward's passes A and B: a.segs, a.seg_len; and a.dh_split, whether the dh pass splits too. A split dh pass
// (launch_state_passes) runs pass A' over the split sequences' segments but the first and pass C over every segment
// but their last: the unsplit work plus the middle segments once more (they are rewritten), no E/M doubling, so on
// dh_wgmma_kernel (dh_wgmma: the split pass's kernel unless GLR_DH_WGMMA=0) it splits wherever the h pass does. On dh_kernel (mma.sync,
// GLR_DH_WGMMA=0) only where the unsplit dh pass leaves most of the GPU idle: on the H200 B1 T32768 H16 split in 8
// with dh_kernel 1.65 ms against 2.38 unsplit on wgmma (32 64-column blocks for 132 SMs), but on the H100 the packed
// 32k shape (15 sequences, 480 blocks) cut in 4 everywhere took 1.761 ms on dh_kernel against 1.617 unsplit on
// wgmma, and cut by length its chain would still be the whole 5000-token sequence (79 chunks) on the slower kernel:
// there every sequence's 64-column blocks together must be at most half the multiprocessors (2 sequences HV D / 64
// <= SMs, the dense rule's condition). Expected on the H100 for the packed 32k shape on wgmma (not yet run):
// pass A' 64 steps of the 12288-token sequence's last two segments at about 8.4 us (its unsplit 1.617 ms / 192
// chunks), pass C max(79 steps, the work's floor about 0.63 ms): about 1.2-1.3 ms against 1.617 (sm90_notes.md).
inline void gdn_bwd_split_plan(GdnBwdArgs& a, int sms, bool dh_wgmma = bwd_dh_wgmma(true)) {
  const SplitPlan p = gdn_fwd_split_plan(gdn_bwd::wy_args(a), sms);
  a.segs = p.segs;
  a.seg_len = p.len;
  a.dh_split = dh_wgmma || 2LL * a.num_seqs() * a.value_heads() * (a.D / 64) <= sms;
}

}  // namespace glr::cuda::sm90
#include "gdn_bwd_wgmma.cuh"  // chunk_wgmma_kernel, the chunk kernel on wgmma (the default; uses the helpers above)
#include "gdn_bwd_chunk_tma.cuh"  // chunk_tma_kernel, the same on a persistent grid fed by TMA (the default: GLR_BWD_CHUNK_TMA)
#include "gdn_bwd_dh_wgmma.cuh"  // dh_wgmma_kernel, the dh kernel on wgmma (GLR_DH_WGMMA=1; uses the helpers above)
#include "gdn_bwd_dh2.cuh"  // dh2_kernel, the dh pass as a 2-GEMM chain, warp-specialized (GLR_DH_2GEMM=1; uses the helpers above)
#include "gdn_bwd_fused.cuh"  // fused_bwd_kernel, dh chain + chunk phases in one sweep (GLR_FUSED_BWD=1; uses the helpers above)
namespace glr::cuda::sm90 {

#if defined(__CUDACC__) || defined(GLR_SM90_EMU_LAUNCHERS)
namespace gdn_bwd {
// gdn_bwd_mma at head dims kD (K = V = a.D) with the delta rule or without it (kDelta = a.delta); a checked, HV
// and vt set.
template <int kD, bool kDelta>
inline cudaError_t launch_all(const GdnBwdArgs& a, cudaStream_t stream, cudaEvent_t* marks) {
  // the wy and chunk kernels' grid: dense (chunk, b HV + hv); packed (chunk slot of the whole batch, hv)
  const long long NT = a.varlen() ? a.chunk_slots() : (a.T + gdn::C - 1) / gdn::C;
  const int BH = a.varlen() ? a.HV : a.B * a.HV;
  cudaError_t e = cudaSuccess;
  if (a.varlen()) {
    // saved by the forward: its chunk table kernel's verdict, table[0], is the status word (the table is read only)
    e = a.wy_saved ? cudaMemcpyAsync(a.status, a.table, sizeof(std::int32_t), cudaMemcpyDeviceToDevice, stream)
                   : launch_kernel(&gdn::chunk_table_kernel, dim3(1), gdn::kThreads, gdn::table_smem_bytes, stream,
                                   wy_args(a), emu_smem);
    if (e != cudaSuccess) return e;
  }
  if (NT > 0 && !a.wy_saved) {
    e = launch_kernel(&gdn::wy_kernel<3, kDelta, kD>, dim3(static_cast<unsigned>(NT), BH), gdn::kThreads,
                      gdn::wy_smem_bytes(3), stream, wy_args(a), emu_smem);
    if (e != cudaSuccess) return e;
  }
  if (NT > 0 && a.wy_saved) {  // T and G saved: Gr and beta from g and beta, one warp a chunk
    constexpr long long kWarps = gdn::kThreads / 32;
    e = launch_kernel(&gdn::wy_scalars_kernel<kDelta>, dim3(static_cast<unsigned>((NT + kWarps - 1) / kWarps), BH),
                      gdn::kThreads, 0, stream, wy_args(a), emu_smem);
    if (e != cudaSuccess) return e;
  }
  if (marks && (e = cudaEventRecord(marks[0], stream)) != cudaSuccess) return e;
  // GLR_FUSED_BWD=1 (K = V = 128, the delta rule): the h pass, then one fused sweep for the dh and chunk kernels
  // (gdn_bwd_fused.cuh; opt-in, not yet run on a GPU)
  const bool fused = fused_bwd_takes<kD, kDelta>(a);
  e = fused          ? launch_fused_bwd<kD, kDelta>(a, stream, marks)
      : a.vt == 64   ? launch_state_passes<64, kD, kDelta>(a, stream, marks)
      : a.vt == 32 ? launch_state_passes<32, kD, kDelta>(a, stream, marks)
                   : launch_state_passes<16, kD, kDelta>(a, stream, marks);
  if (e != cudaSuccess) return e;
  if (marks && (e = cudaEventRecord(marks[2], stream)) != cudaSuccess) return e;
  bool grouped = false;  // GVA: dq, dk summed inside the chunk kernel (group_sum_last), no group_kernel
  if (NT > 0 && !fused) {
    // on wgmma by default (GLR_BWD_WGMMA=0: chunk_kernel), chunk_wgmma_kernel (GLR_BWD_CHUNK_TMA=1: chunk_tma_kernel
    // where it takes a; env_switch.hpp). a.qkt only for the two that sum the group (chunk_group_args).
    GdnBwdArgs c = a;
    c.qkt = nullptr;
    if (!bwd_chunk_wgmma()) {
      if ((e = chunk_group_args(a, c, stream)) != cudaSuccess) return e;
      e = launch_kernel(&chunk_kernel<kD, kDelta>, dim3(static_cast<unsigned>(NT), BH), gdn::kThreads,
                        sizeof(ChunkSmem<kD>), stream, c, emu_smem);
    } else if (!bwd_chunk_tma() || !launch_chunk_tma<kD, kDelta>(c, static_cast<int>(NT), BH, stream, emu_smem, e)) {
      if ((e = chunk_group_args(a, c, stream)) != cudaSuccess) return e;
      e = launch_chunk_wgmma<kD, kDelta>(c, dim3(static_cast<unsigned>(NT), BH), stream, emu_smem);
    }
    if (e != cudaSuccess) return e;
    grouped = c.qkt != nullptr;
  }
  if (a.gate == 2) {  // one g per value head: the sum of the chunks' shares (dg = 0 without chunks)
    e = launch_kernel(&dg_head_kernel, dim3(a.HV), gdn::kThreads, dg_head_smem_bytes, stream, a, emu_smem);
    if (e != cudaSuccess) return e;
  }
  if (a.T > 0 && a.HV > a.H && !grouped) {  // GVA: the group sums of dq and dk (a grid-stride loop: 3 blocks on the emulator)
    const long long n4 = static_cast<long long>(a.B) * a.T * a.H * (kD / 4);
    const long long need = (n4 + gdn::kThreads - 1) / gdn::kThreads;
    const int blocks = static_cast<int>(need < (1 << 20) ? need : (1 << 20));
    e = launch_kernel(&group_kernel<kD>, dim3(blocks), gdn::kThreads, 0, stream, a, emu_smem, 3);
    if (e != cudaSuccess) return e;
  }
  if (a.varlen()) {
    // a grid-stride loop: on the emulator 2 blocks do what 256 do on the GPU
    e = launch_kernel(&poison_kernel, dim3(256), gdn::kThreads, 0, stream, a, emu_smem, 2);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}
}  // namespace gdn_bwd

// Launch the four kernels on `stream` (packed sequences: the forward's chunk table kernel first, the poison kernel
// last; the status word a.status then 0, or 1 for invalid offsets; a.wy_saved: no chunk table or wy kernel but
// wy_scalars_kernel, the saved verdict copied to a.status). Requires gdn_bwd_mma_refusal(args) null; returns cudaErrorInvalidValue
// otherwise (or for a vt other than 0, 16, 32, 64, or wider than D), else the first launch error. marks, if not null, are 3 events
// recorded after the wy, h and dh kernels. vt: the slice width of the h and dh kernels (64, 32, 16), 0 =
// gdn_bwd_slice_width; the results' bits depend on it only through the order of dbeta's per-slice sums (each
// width is deterministic run to run). args.segs (set before sizing and carving the workspace): the split state
// passes in that many segments (1: unsplit; the rule is gdn_bwd_split_segments, glr's dispatch applies it); split
// and unsplit results differ by rounding only.
inline cudaError_t gdn_bwd_mma(const GdnBwdArgs& args, cudaStream_t stream, cudaEvent_t* marks = nullptr, int vt = 0) {
  if (gdn_bwd_mma_refusal(args) != nullptr || (vt != 0 && vt != 16 && vt != 32 && vt != 64) || vt > args.D)
    return cudaErrorInvalidValue;
  GdnBwdArgs a = args;
  a.HV = a.value_heads();
  a.vt = vt != 0 ? vt : gdn_bwd_slice_width(static_cast<int>((a.dh_split ? seg::rows(a) : a.num_seqs()) * a.HV), a.D);
  if (a.delta)
    return a.D == 64 ? gdn_bwd::launch_all<64, true>(a, stream, marks) : gdn_bwd::launch_all<128, true>(a, stream, marks);
  return a.D == 64 ? gdn_bwd::launch_all<64, false>(a, stream, marks) : gdn_bwd::launch_all<128, false>(a, stream, marks);
}
#endif  // __CUDACC__ || GLR_SM90_EMU_LAUNCHERS

}  // namespace glr::cuda::sm90
