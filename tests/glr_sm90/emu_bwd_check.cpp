// tests/glr_sm90/emu_bwd_check.cpp: the sm90 tensor-core Gated DeltaNet backward (gdn_bwd_mma.cuh: the forward's
// wy kernel, then the h, dh and chunk kernels), run on the host through tests/glr_sm90/emu.hpp, against a float64
// sequential recurrence and its hand-written reverse-time backward (as glr/reference/recurrent.cpp). Small
// shapes; build and run: tests/glr_sm90/run_emu_bwd.sh. Exits non-zero on failure.
//
// Bound (bench/glr/sm90_bwd_notes.md): every tensor-core operand is rounded to bf16 (u = 2^-9): T, h, dh', V_new,
// dX, dV_new, X, P, P^T, dA, E, scale e^G dO, beta e^G dX, and dq, dk, dv on output. About ten such roundings lie
// on the longest path to a gradient; independent roundings add in quadrature (~sqrt(10) u ~ 3 u) and the recurrence
// (|k| = 1, 0 < beta < 1, g <= 0) does not amplify them. Pass: ||x - ref|| / ||ref|| <= 8 u (1.6e-2) for dq, dk,
// dv, dbeta, dh0, and 16 u for dg (a reverse cumulative sum of per-token terms that largely cancel). Measured:
// 1.5 u to 3 u. Every output finite and written (NaN poison before the run). A looser 16 u let a dropped E^T K
// term in dk pass at fast decay (2.9e-2); see the notes' mutation list.
//
// bf16 g and beta (run_bf16; argument "bf16" alone, also in the default run): dq, dk, dv, dh0 bit for bit those of
// the fp32 run on the same values, the bf16 dg, dbeta bit for bit the fp32 run's rounded once to nearest even, and
// the float64 bounds above plus one bf16 rounding (u) for the bf16 dg, dbeta. Mutations that must fail it (checked
// 2026-12-04): rounding toward zero in the bf16 store (caught only by the bit comparison: rel2 stays in bound),
// the store at a neighbouring index, the beta_bf16 flag not passed to the wy kernel.
//
// Planted NaN / +-Inf (run_rule_cases; arguments "rule" or "planted"): every output judged by kgate's nan/inf gate
// rule as glr/contracts/sm90/*_bwd.toml set it (docs/glr-math.md section 7; see rule_offenders). Before the
// kernels formed their decays between two tokens from Gr, NaN or +Inf in g at a sequence's first token failed it
// (every dv NaN, the oracle's finite), as kgate did on the H200.
//
// K = V = 64 (Shape::D = 64; the kernels' kD = 64 instantiation, 2026-12-04): cases in every family (shapes, gva,
// bf16, sweep, planted, rule, varlen), tagged "K=V=64" in their lines; "k64" (or GLR_EMU_K64=1 with any subset) runs
// those alone. Mutation that fails them and no K = 128 case (checked 2026-12-04, in a copy): the dh kernel's dbeta
// partials offset with the 128 constant, R * (gdn::DV / kVT): dbeta inf/NaN wherever a second head or sequence exists.
// clang-format off
// emu.hpp, the wgmma twins (the chunk kernel on wgmma, the default; dh with GLR_DH_WGMMA=1) and gdn_bwd_mma.cuh with its launchers on the
// emulator (gdn_bwd_mma itself runs the split cases; glr/cuda/sm90/emu/emu_launch.cpp, linked in, defines the
// kernels' shared memory and the runtime calls the launchers make)
#include "../../glr/cuda/sm90/emu/sm90_emu.hpp"
#include "../../bench/glr/sm90_bwd_reference.cuh"
#include "emu_dump.hpp"  // each case's gradients: GLR_EMU_DIGEST, GLR_EMU_DUMP
// clang-format on

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>

namespace glr::sm90_bwd_reference {  // the GPU check's float64 reference (bench/glr/sm90_bwd_reference.cuh)
alignas(16) double ref_smem[kSmemBytes / sizeof(double)];
}

namespace {

using glr::cuda::sm90::GdnBwdArgs;
namespace gdn = glr::cuda::sm90::gdn;
namespace gdn_bwd = glr::cuda::sm90::gdn_bwd;
// The chunk and dh kernels, as gdn_bwd_mma's launcher picks them (the switches: glr/cuda/README.md): the chunk
// kernel chunk_wgmma_kernel (gdn_bwd_wgmma.cuh; GLR_BWD_CHUNK_TMA=1: chunk_tma_kernel, gdn_bwd_chunk_tma.cuh, through
// its launcher launch_chunk_tma: the persistent grid, 2 blocks on the emulator; GLR_BWD_WGMMA=0: chunk_kernel), the dh kernel
// dh_wgmma_kernel (gdn_bwd_dh_wgmma.cuh; GLR_DH_WGMMA=0: dh_kernel; GLR_DH_2GEMM=1: dh2_kernel), the same grids. on_wgmma: -1 as the environment says,
// 0 both on mma.sync, 1 both on wgmma (the "wgmma" subset runs each case both ways and compares them).
int on_wgmma = -1;
bool chunk_on_wgmma() { return on_wgmma < 0 ? glr::cuda::sm90::bwd_chunk_wgmma() : on_wgmma == 1; }
// (As the environment says for a split pass: unset -> dh_wgmma_kernel, so the default runs keep exercising it; the
// library's unsplit pass runs dh_kernel when unset, the same words: GLR_DH_WGMMA=0 runs it here.)
bool dh_on_wgmma() { return on_wgmma < 0 ? glr::cuda::sm90::bwd_dh_wgmma(true) : on_wgmma == 1; }
// Returns whether the chunk kernel summed the groups' dq, dk itself (GVA; gdn_bwd::chunk_group_args, as launch_all:
// then no group_kernel). force_group_kernel: group_kernel whatever GLR_BWD_GROUP_KERNEL says (each GVA case runs
// once more so, and its dq, dk must be the same words).
bool force_group_kernel = false;
template <int kD, bool kDelta>
bool launch_chunk(int gx, int gy, const GdnBwdArgs& a) {
  cudaError_t e = cudaSuccess;
  GdnBwdArgs c = a;
  c.qkt = nullptr;
  if (chunk_on_wgmma() && glr::cuda::sm90::bwd_chunk_tma() &&
      gdn_bwd::launch_chunk_tma<kD, kDelta>(c, gx, gy, nullptr, gdn_bwd::smem_raw, e)) {
    if (e != cudaSuccess) {
      std::printf("emu bwd: launch_chunk_tma: %s | FAIL\n", cudaGetErrorName(e));
      std::exit(3);
    }
    return false;
  }
  if (!force_group_kernel) gdn_bwd::chunk_group_args(a, c, nullptr);
  if (chunk_on_wgmma())
    emu::launch(&gdn_bwd::chunk_wgmma_kernel<kD, kDelta>, gx, gy, gdn_bwd::smem_raw, gdn_bwd::chunk_wgmma_smem_bytes<kD>, c,
                gdn_bwd::kChunkWgThreads);
  else
    emu::launch(&gdn_bwd::chunk_kernel<kD, kDelta>, gx, gy, gdn_bwd::smem_raw, sizeof(gdn_bwd::ChunkSmem<kD>), c);
  return c.qkt != nullptr;
}
// GLR_DH_2GEMM=1 (dh2_mode -1: as the environment says; 0 off, 1 on: the "dh2" subset runs each case both ways
// and counts the words that differ): dh2_kernel (gdn_bwd_dh2.cuh) where it applies (gdn_bwd::dh2_takes), as
// launch_state_passes picks it.
int dh2_mode = -1;
bool dh_on_2gemm() { return dh2_mode < 0 ? glr::cuda::sm90::bwd_dh_2gemm() : dh2_mode == 1; }
// dh_prefetch: dh_wgmma_kernel's prefetching schedule (GLR_DH_PREFETCH, where gdn_bwd::dh_prefetch_takes: 64 columns,
// the delta rule): -1 as the environment says, 0 off, 1 on (the "dh-prefetch" subset runs both and compares them).
int dh_prefetch = -1;
bool dh_on_prefetch() { return dh_prefetch < 0 ? glr::cuda::sm90::bwd_dh_prefetch() : dh_prefetch == 1; }
template <int kVT, int kD, bool kDelta>
void launch_dh(int gy, const GdnBwdArgs& a) {
  if constexpr (gdn_bwd::dh2_takes<kVT, kD, kDelta>)
    if (dh_on_2gemm()) {
      emu::launch(&gdn_bwd::dh2_kernel<kD, kDelta>, kD / kVT, gy, gdn_bwd::smem_raw, gdn_bwd::dh2_smem_bytes<kD>, a,
                  gdn_bwd::kDh2Threads);
      return;
    }
  // dh_wgmma_kernel's parameter: a and dhc's tensor map (its TMA stores of dh'); without one (no chunk slots: packed
  // sequences all empty) dh_kernel, as gdn_bwd::launch_dh_wgmma
  gdn_bwd::DhWgArgs p;
  const bool wg = dh_on_wgmma() && gdn_bwd::dh_wgmma_args<kVT, kD>(a, p);
  if constexpr (gdn_bwd::dh_prefetch_takes<kVT, kD, kDelta>)
    if (wg && dh_on_prefetch()) {
      emu::launch(&gdn_bwd::dh_wgmma_kernel<kVT, kD, kDelta, false, true>, kD / kVT, gy, gdn_bwd::smem_raw,
                  gdn_bwd::dh_wgmma_pipe_smem_bytes<kD>, p);
      return;
    }
  if (wg)
    emu::launch(&gdn_bwd::dh_wgmma_kernel<kVT, kD, kDelta>, kD / kVT, gy, gdn_bwd::smem_raw,
                gdn_bwd::dh_wgmma_smem_bytes<kVT, kD>, p);
  else
    emu::launch(&gdn_bwd::dh_kernel<kVT, kD, kDelta>, kD / kVT, gy, gdn_bwd::smem_raw, sizeof(gdn_bwd::DhSmem<kVT, kD>), a);
}
// The h pass, as launch_state_passes picks it (gdn_bwd::launch_h_pass: GLR_H_WGMMA=1 puts it on wgmma,
// state_t_wgmma_kernel's h mode, at 64-column slices; else h_kernel). h_wgmma: -1 as the environment says, 0
// h_kernel, 1 wgmma (the "h-wgmma" subset runs both and compares them). The split cases' runs are gdn_bwd_mma's
// own launches, which follow the environment.
// h_prefetch: h_kernel's prefetching schedule (GLR_H_PREFETCH, the delta rule): -1 as the environment says, 0 off, 1
// on (the "h-prefetch" subset runs both and compares them).
int h_wgmma = -1, h_prefetch = -1;
bool h_on_wgmma() { return h_wgmma < 0 ? glr::cuda::sm90::bwd_h_wgmma() : h_wgmma == 1; }
bool h_on_prefetch() { return h_prefetch < 0 ? glr::cuda::sm90::bwd_h_prefetch() : h_prefetch == 1; }
template <int kVT, int kD, bool kDelta>
void launch_h(const GdnBwdArgs& a) {
  if (gdn_bwd::launch_h_pass<kVT, kD, kDelta>(a, nullptr, h_on_wgmma(), h_on_prefetch()) != cudaSuccess) std::exit(3);
}
// g_h_only 0 / 1: run_kernels runs the wy kernel and then only the h pass (launch_h_pass, split or not) with h_kernel
// (0) or on wgmma (1), and leaves the h pass's words in g_h_words: h_c, V_new and its residual (16-bit words, the
// whole workspace pieces, unwritten padding slots included) and Es (32-bit words; split only). -1: the whole backward.
int g_h_only = -1;
struct HWords {
  std::vector<std::uint16_t> h16;
  std::vector<std::uint32_t> es;
};
HWords g_h_words;
// g_dh_only 0 / 1: run_kernels runs the wy kernel and then only the state passes (gdn_bwd::launch_state_passes, split
// or not: the h pass as the environment says, then the dh pass with dh_wgmma_kernel's plain (0) or prefetching (1)
// schedule) and leaves in g_dh_words every 32-bit word of the workspace (the h pass's and the dh pass's outputs:
// h_c, V_new, dh_c and their residuals, dX, the dbeta partials, Es; unwritten words included), then dv's and dh0's
// 16- and 32-bit words. -1: the whole backward.
int g_dh_only = -1;
std::vector<std::uint32_t> g_dh_words;
// g_chunk_inputs_kept: run_kernels carves the chunk kernels' inputs whatever the switches say (GdnBwdArgs::
// chunk_inputs_kept) and, after the run, leaves in g_chunk_inputs_touched how many bytes of the dX, dh', dh''s
// residual and dbeta-partial pieces (dx, dhc, dhcl, dbv) differ from the workspace's 0x7f poison, and in
// g_chunk_inputs_bytes their size (run_fused_untouched: the fused path must write none of them).
bool g_chunk_inputs_kept = false;
std::size_t g_chunk_inputs_touched = 0, g_chunk_inputs_bytes = 0;
// The head dims (K = V) of the case being run: 128, or 64 for the Shape::D = 64 cases; set by use_dims at the
// entry of run, run_bf16, run_rule and run_varlen, read by every helper below (the cases run one at a time).
int KD = 128, VD = 128;
void use_dims(int D) { KD = VD = D; }
// The fused reverse sweep (gdn_bwd_fused.cuh) takes this case: GLR_FUSED_BWD=1 (fused_mode -1: as the environment
// says; 0 off, 1 on: the "fused" subset runs each case both ways and compares them) at K = V = 128 with the delta
// rule (gdn_bwd::fused_bwd_takes). run_kernels' launches then run the h pass and launch_fused_bwd instead of the
// dh and chunk kernels; split and packed runs are gdn_bwd_mma's own launches (launch_all), which read the environment.
int fused_mode = -1;
bool fused_case(bool delta) {
  return (fused_mode < 0 ? glr::cuda::sm90::bwd_fused() : fused_mode == 1) && KD == 128 && delta;
}
const char* dims_tag() { return KD == 128 ? "" : " K=V=64"; }  // in every result line of a K = 64 case
// "k64" (or GLR_EMU_K64 set, with any subset): only the K = 64 cases of every family (the default run's, the rule cases and the packed sequences); the
// K = 128 cases return at once, unprinted.
bool k64_only = false;
bool skip_case(int D) { return k64_only && D == 128; }

struct Shape {
  int B, T, H;
  bool h0, dht;
  double mu;  // +inf: DeltaNet (g = 0: the kernels run with gate 0, read no g and write no dg)
  int vt;  // state columns per block of the h and dh kernels: 64, 32 or 16
  int plant = 0;  // 1: NaN, 2: +-Inf in v at the last token of every sequence (kgate's nan and inf gates, shrunk):
                  // the exact dg, dv and dh0 stay finite (the state before a token does not hold its v); only
                  // those are checked. 3: g = -Inf (a legal decay, the state reset) at token T / 2 of every
                  // sequence: every output stays finite, all are checked
  int HV = 0;  // value heads (grouped value heads: a multiple of H, value head hv reads q/k head hv / (HV / H)); 0: H
  int D = 128;  // K = V: 128, or 64 (the kernels' kD = 64 instantiation)
  // The family member: 0 the delta rule (Gated DeltaNet, or DeltaNet with mu = +inf); without it (the kernels'
  // kDelta = false): 1 Mamba2 (g per token), 2 RetNet (one g per value head: batch row 0's first token's draw,
  // repeated at every token; dg (HV), the sum over every token), 3 linear attention (g = 0). No beta, no dbeta.
  int member = 0;
  int segs = 1;  // the split state passes forced to this many segments (GdnBwdArgs::segs; > 1: also run unsplit)
  int seg_len = 1;       // GdnBwdArgs::seg_len: segments by length (segments.cuh); 1 with segs: the count
  bool dh_split = true;  // GdnBwdArgs::dh_split: false splits the h pass only
  bool deltanet() const { return member == 0 && std::isinf(mu) && mu > 0; }
  bool delta() const { return member == 0; }
  int gate() const { return member == 0 ? (deltanet() ? 0 : 1) : member == 1 ? 1 : member == 2 ? 2 : 0; }
  int hv() const { return HV > 0 ? HV : H; }
};
const char* member_tag(int m) { return m == 1 ? " mamba2" : m == 2 ? " retnet" : m == 3 ? " linear_attention" : ""; }

struct Inputs {
  std::vector<__nv_bfloat16> q, k, v, dout;
  std::vector<float> g, beta, h0, dht;
};

struct Grads {
  std::vector<double> dq, dk, dv, dg, dbeta, dh0;
};

double f(__nv_bfloat16 x) { return static_cast<double>(__bfloat162float(x)); }

// float64 recurrence: S_t = e^{g_t} S_{t-1} + k_t u_t^T, u_t = beta_t (v_t - e^{g_t} S_{t-1}^T k_t),
// o_t = scale S_t^T q_t; reverse-time backward with all states kept (T is small here).
// Grouped value heads: value head hv runs this recurrence on q/k head hv / (HV / H); dq and dk of a q/k head are
// the sums over its group's value heads.
Grads reference(const Shape& p, const Inputs& in, double scale) {
  const int HV = p.hv(), grp = HV / p.H;
  const bool delta = p.delta();  // without it u_t = v_t: no delta read, no beta (in.beta unread), dbeta left 0
  const std::size_t tok = static_cast<std::size_t>(p.B) * p.T * p.H, vtok = static_cast<std::size_t>(p.B) * p.T * HV;
  Grads r;
  r.dq.assign(tok * KD, 0);
  r.dk.assign(tok * KD, 0);
  r.dv.assign(vtok * VD, 0);
  r.dg.assign(vtok, 0);
  r.dbeta.assign(vtok, 0);
  r.dh0.assign(static_cast<std::size_t>(p.B) * HV * KD * VD, 0);
  const int KV = KD * VD;
  for (int b = 0; b < p.B; ++b)
    for (int h = 0; h < HV; ++h) {
      const std::size_t bh = static_cast<std::size_t>(b) * HV + h;
      auto at = [&](int t) { return (static_cast<std::size_t>(b) * p.T + t) * HV + h; };
      auto qat = [&](int t) { return (static_cast<std::size_t>(b) * p.T + t) * p.H + h / grp; };
      std::vector<std::vector<double>> S(p.T + 1, std::vector<double>(KV, 0.0));
      if (p.h0)
        for (int i = 0; i < KV; ++i) S[0][i] = in.h0[bh * KV + i];
      for (int t = 0; t < p.T; ++t) {
        const std::size_t tk = at(t), tq = qat(t);
        const double e = std::exp(static_cast<double>(in.g[tk])), bt = delta ? in.beta[tk] : 1.0;
        for (int c = 0; c < VD; ++c) {
          double kS = 0;
          for (int d = 0; d < KD; ++d) kS += f(in.k[tq * KD + d]) * S[t][d * VD + c];
          const double u = delta ? bt * (f(in.v[tk * VD + c]) - e * kS) : f(in.v[tk * VD + c]);
          for (int d = 0; d < KD; ++d) S[t + 1][d * VD + c] = e * S[t][d * VD + c] + f(in.k[tq * KD + d]) * u;
        }
      }
      std::vector<double> dS(KV, 0.0), P(KV), dP(KV), rr(VD), u(VD), du(VD);
      if (p.dht)
        for (int i = 0; i < KV; ++i) dS[i] = in.dht[bh * KV + i];
      for (int t = p.T - 1; t >= 0; --t) {
        const std::size_t tk = at(t), tq = qat(t);
        const double e = std::exp(static_cast<double>(in.g[tk])), bt = delta ? in.beta[tk] : 1.0;
        const __nv_bfloat16 *q = &in.q[tq * KD], *k = &in.k[tq * KD], *v = &in.v[tk * VD], *dO = &in.dout[tk * VD];
        for (int i = 0; i < KV; ++i) P[i] = e * S[t][i];
        for (int c = 0; c < VD; ++c) {
          double acc = 0;
          for (int d = 0; d < KD; ++d) acc += P[d * VD + c] * f(k[d]);
          rr[c] = acc;
          u[c] = delta ? bt * (f(v[c]) - acc) : f(v[c]);
        }
        const std::vector<double>& St = S[t + 1];
        for (int d = 0; d < KD; ++d) {
          double acc = 0;
          for (int c = 0; c < VD; ++c) {
            dS[d * VD + c] += scale * f(q[d]) * f(dO[c]);
            acc += St[d * VD + c] * f(dO[c]);
          }
          r.dq[tq * KD + d] += scale * acc;
        }
        for (int d = 0; d < KD; ++d) {
          double acc = 0;
          for (int c = 0; c < VD; ++c) acc += dS[d * VD + c] * u[c];
          r.dk[tq * KD + d] += acc;
        }
        for (int c = 0; c < VD; ++c) {
          double acc = 0;
          for (int d = 0; d < KD; ++d) acc += dS[d * VD + c] * f(k[d]);
          du[c] = acc;
        }
        dP = dS;
        double db = 0;
        for (int c = 0; c < VD; ++c) {
          r.dv[tk * VD + c] = bt * du[c];
          db += du[c] * (f(v[c]) - rr[c]);
        }
        r.dbeta[tk] = delta ? db : 0.0;
        for (int d = 0; delta && d < KD; ++d) {
          double acc = 0;
          for (int c = 0; c < VD; ++c) {
            dP[d * VD + c] += f(k[d]) * (-bt * du[c]);
            acc += P[d * VD + c] * (-bt * du[c]);
          }
          r.dk[tq * KD + d] += acc;
        }
        double dgt = 0;
        for (int i = 0; i < KV; ++i) dgt += P[i] * dP[i];
        r.dg[tk] = dgt;
        for (int i = 0; i < KV; ++i) dS[i] = e * dP[i];
      }
      for (int i = 0; i < KV; ++i) r.dh0[bh * KV + i] = dS[i];
    }
  return r;
}

// GLR_EMU_INPUTS picks the inputs: unset, this check's own (unit q and k rows, g = logsigmoid(mu + z), scale
// 1/sqrt(128)); "contract": the distributions of glr/contracts/sm90/gated_deltanet_bwd.toml (q, v, dout, dht normal,
// k uniform in +-1/8, g uniform in [-1, 0], beta uniform in (0, 1), h0 normal with std 1/2, scale 1/8);
// "accumulation": that contract's accumulation patterns (kgate's "positive" value x: uniform in [x/2, x]; q 1,
// k 1/16, v 1, beta 2^-10, h0 0.01, dout 1, dht 1; g the constant -0.01; scale 1/8). With either, each output also prints what kgate's per-element tolerance needs.
enum class InputKind { check, contract, accumulation };
InputKind inputs_kind() {
  const char* e = std::getenv("GLR_EMU_INPUTS");
  if (e == nullptr || *e == '\0') return InputKind::check;
  if (std::string(e) == "contract") return InputKind::contract;
  if (std::string(e) == "accumulation") return InputKind::accumulation;
  std::fprintf(stderr, "GLR_EMU_INPUTS=%s: use contract or accumulation\n", e);
  std::exit(2);
}

Inputs make_inputs_draw(const Shape& p, unsigned seed);
// The member's gate: RetNet's g the per-value-head constant (batch row 0, token 0's draw), linear attention g = 0.
Inputs make_inputs(const Shape& p, unsigned seed) {
  Inputs in = make_inputs_draw(p, seed);
  const std::size_t HV = p.hv();
  for (std::size_t i = 0; i < in.g.size(); ++i)
    if (p.member == 2)
      in.g[i] = in.g[i % HV];
    else if (p.member == 3)
      in.g[i] = 0.f;
  return in;
}
// RetNet's dg: the per-token reference dg summed over every token of every sequence, per value head.
std::vector<double> head_sums(const std::vector<double>& per_token, int HV) {
  std::vector<double> h(HV, 0.0);
  for (std::size_t i = 0; i < per_token.size(); ++i) h[i % HV] += per_token[i];
  return h;
}
Inputs make_inputs_draw(const Shape& p, unsigned seed) {
  if (inputs_kind() != InputKind::check) {
    const bool acc = inputs_kind() == InputKind::accumulation;
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> nd;
    std::uniform_real_distribution<double> un(0.0, 1.0);
    const std::size_t tok = static_cast<std::size_t>(p.B) * p.T * p.H, hs = static_cast<std::size_t>(p.B) * p.hv() * KD * VD;
    const std::size_t vtok = static_cast<std::size_t>(p.B) * p.T * p.hv();
    auto bf = [](double x) { return __float2bfloat16_rn(static_cast<float>(x)); };
    auto pos = [&](double x) { return x * (0.5 + 0.5 * un(rng)); };  // kgate's "positive" pattern
    Inputs in;
    for (auto* x : {&in.q, &in.v, &in.dout}) {
      x->resize((x == &in.q ? tok : vtok) * KD);
      for (auto& e : *x) e = bf(acc ? pos(1.0) : nd(rng));
    }
    in.k.resize(tok * KD);
    // (the members without the delta rule: k normal, and in the accumulation case k and h0 "positive" 1, as
    // glr/contracts/sm90/{mamba2,retnet,linear_attention}_bwd.toml set them)
    for (auto& e : in.k)
      e = !p.delta() ? bf(acc ? pos(1.0) : nd(rng)) : bf(acc ? pos(0.0625) : -0.125 + 0.25 * un(rng));
    in.g.resize(vtok);
    in.beta.resize(vtok);
    for (std::size_t i = 0; i < vtok; ++i) {
      in.g[i] = static_cast<float>(p.deltanet() ? 0.0 : acc ? -0.01 : -un(rng));
      in.beta[i] = static_cast<float>(acc ? pos(0.0009765625) : un(rng));
    }
    in.h0.resize(p.h0 ? hs : 0);
    for (auto& x : in.h0) x = static_cast<float>(acc ? pos(p.delta() ? 0.01 : 1.0) : 0.5 * nd(rng));
    in.dht.resize(p.dht ? hs : 0);
    for (auto& x : in.dht) x = static_cast<float>(acc ? pos(1.0) : nd(rng));
    // GLR_EMU_SCALE=s (contract inputs): kgate's oracle-gate sweep, the draw's normal-domain inputs (q, v, dout,
    // h0, dht) times s; k, g and beta keep their bounded domains.
    if (const char* sc = std::getenv("GLR_EMU_SCALE"); sc != nullptr && !acc) {
      const double f = std::atof(sc);
      for (auto* x : {&in.q, &in.v, &in.dout})
        for (auto& e : *x) e = bf(f * static_cast<double>(__bfloat162float(e)));
      for (auto* x : {&in.h0, &in.dht})
        for (auto& e : *x) e = static_cast<float>(f * e);
    }
    return in;
  }
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd;
  const std::size_t tok = static_cast<std::size_t>(p.B) * p.T * p.H, hs = static_cast<std::size_t>(p.B) * p.hv() * KD * VD;
  const std::size_t vtok = static_cast<std::size_t>(p.B) * p.T * p.hv();
  Inputs in;
  in.q.resize(tok * KD);
  in.k.resize(tok * KD);
  in.v.resize(vtok * VD);
  in.dout.resize(vtok * VD);
  auto rows = [&](std::vector<__nv_bfloat16>& x, bool unit) {
    for (std::size_t r = 0; r < x.size() / KD; ++r) {
      double val[128], ss = 0;
      for (int d = 0; d < KD; ++d) {
        val[d] = nd(rng);
        ss += val[d] * val[d];
      }
      for (int d = 0; d < KD; ++d)
        x[r * KD + d] = __float2bfloat16_rn(static_cast<float>(unit ? val[d] / std::sqrt(ss) : val[d]));
    }
  };
  rows(in.q, true);
  rows(in.k, true);
  rows(in.v, false);
  rows(in.dout, false);
  in.g.resize(vtok);
  in.beta.resize(vtok);
  for (std::size_t i = 0; i < vtok; ++i) {
    in.g[i] = static_cast<float>(-std::log1p(std::exp(-(p.mu + nd(rng)))));
    in.beta[i] = static_cast<float>(1.0 / (1.0 + std::exp(-nd(rng))));
  }
  in.h0.resize(p.h0 ? hs : 0);
  for (auto& x : in.h0) x = static_cast<float>(0.1 * nd(rng));
  in.dht.resize(p.dht ? hs : 0);
  for (auto& x : in.dht) x = static_cast<float>(nd(rng));
  return in;
}

struct Outputs {
  std::vector<__nv_bfloat16> dq, dk, dv;
  std::vector<float> dg, dbeta, dh0;          // dg, dbeta: fp32 g, beta
  std::vector<__nv_bfloat16> dg16, dbeta16;  // bf16 g, beta (g_bf16, beta_bf16)
};
// f(x's, y's) over the six gradients two runs return in fp32 g, beta: dq, dk, dv, dg, dbeta, dh0.
template <class F>
void for_gradients(const Outputs& x, const Outputs& y, F&& f) {
  f(x.dq, y.dq);
  f(x.dk, y.dk);
  f(x.dv, y.dv);
  f(x.dg, y.dg);
  f(x.dbeta, y.dbeta);
  f(x.dh0, y.dh0);
}

// Every gradient of a run recorded, to compare two builds (emu_dump.hpp: GLR_EMU_DIGEST, GLR_EMU_DUMP): " | digest
// <hex>" for the case's line, or "" when neither is set.
std::string gradient_digest(const Outputs& o) {
  emu_dump::Case record;
  record.add("dq", o.dq.data(), o.dq.size() * 2);
  record.add("dk", o.dk.data(), o.dk.size() * 2);
  record.add("dv", o.dv.data(), o.dv.size() * 2);
  record.add("dg", o.dg.data(), o.dg.size() * 4);
  record.add("dbeta", o.dbeta.data(), o.dbeta.size() * 4);
  record.add("dh0", o.dh0.data(), o.dh0.size() * 4);
  char buf[40] = "";
  if (unsigned long long d; record.digest(d)) std::snprintf(buf, sizeof buf, " | digest %016llx", d);
  return buf;
}

// g16, b16: pass g, beta as bf16 (their values must be bf16-representable: they are converted, and the fp32 run
// of the same values is the comparison), dg, dbeta then come back in bf16.
// Two runs' outputs compared: the words that differ bitwise, and the largest |x - y| relative to y's rms over the
// finite elements (Inf where one is finite and the other not; 0 when nothing differs numerically).
struct WordDiff {
  std::size_t words = 0;
  double worst = 0;
};
template <class V>
WordDiff word_diff(const V& x, const V& y) {
  WordDiff d;
  double r2 = 0, dmax = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double xv = static_cast<double>(static_cast<float>(x[i])), yv = static_cast<double>(static_cast<float>(y[i]));
    if (std::memcmp(&x[i], &y[i], sizeof x[i]) != 0) ++d.words;
    if (std::isfinite(yv)) r2 += yv * yv;
    if (std::isfinite(xv) && std::isfinite(yv)) dmax = std::max(dmax, std::fabs(xv - yv));
    else if (std::isfinite(xv) != std::isfinite(yv)) dmax = INFINITY;
  }
  const double rms = x.empty() ? 0 : std::sqrt(r2 / static_cast<double>(x.size()));
  if (dmax > 0) d.worst = rms > 0 ? dmax / rms : INFINITY;
  return d;
}

Outputs run_kernels(const Shape& p, const Inputs& in, float scale, bool g16 = false, bool b16 = false) {
  const std::size_t tok = static_cast<std::size_t>(p.B) * p.T * p.H, hs = static_cast<std::size_t>(p.B) * p.hv() * KD * VD;
  const std::size_t vtok = static_cast<std::size_t>(p.B) * p.T * p.hv();
  Outputs o;
  __nv_bfloat16_raw nan_raw;
  nan_raw.x = 0xffff;
  const __nv_bfloat16 nanb(nan_raw);
  o.dq.assign(tok * KD, nanb);
  o.dk.assign(tok * KD, nanb);
  o.dv.assign(vtok * VD, nanb);
  const std::size_t gn = p.gate() == 2 ? static_cast<std::size_t>(p.hv()) : vtok;  // RetNet: g, dg (HV)
  o.dg.assign(gn, std::nanf(""));
  o.dbeta.assign(vtok, std::nanf(""));
  o.dh0.assign(p.h0 ? hs : 0, std::nanf(""));
  std::vector<__nv_bfloat16> g_bf(g16 ? gn : 0), beta_bf(b16 ? vtok : 0);
  for (std::size_t i = 0; i < g_bf.size(); ++i) g_bf[i] = __float2bfloat16_rn(in.g[i]);
  for (std::size_t i = 0; i < beta_bf.size(); ++i) beta_bf[i] = __float2bfloat16_rn(in.beta[i]);
  o.dg16.assign(g16 ? gn : 0, nanb);
  o.dbeta16.assign(b16 ? vtok : 0, nanb);
  GdnBwdArgs a;
  a.q = in.q.data();
  a.k = in.k.data();
  a.v = in.v.data();
  a.delta = p.delta();
  a.gate = p.gate();  // RetNet (2): g[hv] = in.g[hv], batch row 0 token 0's (every token's: make_inputs)
  a.g = a.gate == 0 ? nullptr : g16 ? static_cast<const void*>(g_bf.data()) : in.g.data();
  a.g_bf16 = g16;
  a.beta = !p.delta() ? nullptr : b16 ? static_cast<const void*>(beta_bf.data()) : in.beta.data();
  a.beta_bf16 = b16;
  a.h0 = p.h0 ? in.h0.data() : nullptr;
  a.dout = in.dout.data();
  a.dht = p.dht ? in.dht.data() : nullptr;
  a.dq = o.dq.data();
  a.dk = o.dk.data();
  a.dv = o.dv.data();
  a.dg = a.gate == 0 ? nullptr : g16 ? static_cast<void*>(o.dg16.data()) : o.dg.data();
  a.dbeta = !p.delta() ? nullptr : b16 ? static_cast<void*>(o.dbeta16.data()) : o.dbeta.data();
  a.dh0 = p.h0 ? o.dh0.data() : nullptr;
  a.B = p.B;
  a.T = p.T;
  a.H = p.H;
  a.scale = scale;
  a.vt = p.vt;
  a.HV = p.hv();
  a.D = KD;
  a.segs = p.T > 0 ? p.segs : 1;  // (no chunks: launch_state_passes runs unsplit)
  a.seg_len = p.seg_len;
  a.dh_split = p.dh_split;
  // The chunk kernels' inputs (V_new's pieces, dX, dh', its residual, the dbeta partials: chunk_inputs_stored) where
  // this run reads or writes them whatever the switches say: the chunk kernels (run_kernels runs them unless
  // fused_case, also under GLR_FUSED_BWD=1: the fused subset's fused_mode 0), the h pass's own words (g_h_only), the
  // state passes' words (g_dh_only: launch_state_passes' dh pass writes dX, dh', its residual, the dbeta partials).
  // Where none runs (fused_case) the workspace carves none of them, so a stray store of the fused path (pass A' in
  // its Es-only mode) goes through a null pointer; run_fused_untouched checks the same with every piece carved.
  a.chunk_inputs_kept = g_chunk_inputs_kept || g_h_only >= 0 || g_dh_only >= 0 || !fused_case(p.delta());
  std::vector<std::uint64_t> ws((glr::cuda::sm90::gdn_bwd_workspace_bytes(a) + 7) / 8 + 32);
  std::memset(ws.data(), 0x7f, ws.size() * 8);  // an unwritten workspace read shows up as ~3e38
  glr::cuda::sm90::gdn_bwd_workspace_carve(a, ws.data());
  // Every buffer the kernels may read by cp.async (emu.hpp cp_async_bounds: a tile load past one's end aborts).
  glr::cuda::sm90::CpAsyncBoundsScope bounds;
  bounds.add(in.q, in.k, in.v, in.dout, in.g, in.beta, in.h0, in.dht);
  bounds.add(g_bf, beta_bf, ws);

  // (T = 0, a packed run's empty sequence alone: empty outputs, null pointers, which gdn_bwd_mma itself refuses)
  if (const char* why = p.T > 0 ? glr::cuda::sm90::gdn_bwd_mma_refusal(a) : nullptr) {
    std::printf("emu bwd: refused: %s\n", why);
    std::exit(1);
  }
  auto probe_chunk_inputs = [&] {  // (g_chunk_inputs_kept's comment) the bytes of dx, dhc, dhcl, dbv off the poison
    if (!g_chunk_inputs_kept) return;
    const glr::cuda::sm90::GdnBwdLayout l = glr::cuda::sm90::gdn_bwd_workspace_layout(a);
    const unsigned char* const base = reinterpret_cast<const unsigned char*>(ws.data());
    g_chunk_inputs_touched = g_chunk_inputs_bytes = 0;
    auto scan = [&](std::size_t at) {  // the piece's bytes as the layout carves them (its 256-byte padding too)
      if (at == glr::cuda::sm90::GdnBwdLayout::kAbsent) return;
      const std::size_t bytes = l.extent(at);
      g_chunk_inputs_bytes += bytes;
      for (std::size_t i = 0; i < bytes; ++i) g_chunk_inputs_touched += base[at + i] != 0x7f;
    };
    scan(l.dx);
    scan(l.dhc);
    scan(l.dhcl);
    scan(l.dbv);
  };
  if (g_dh_only >= 0) {  // the state passes alone (g_dh_only's comment)
    const int NT = (p.T + 63) / 64, BH = p.B * p.hv();
    auto passes = [&](auto d, auto dl) {
      constexpr int kD = decltype(d)::value;
      constexpr bool kDelta = decltype(dl)::value;
      if (NT == 0) return;
      emu::launch(&gdn::wy_kernel<3, kDelta, kD>, NT, BH, gdn::smem_raw, gdn::wy_smem_bytes(3), gdn_bwd::wy_args(a));
      const bool pf = g_dh_only == 1;
      const cudaError_t e = p.vt == 64   ? gdn_bwd::launch_state_passes<64, kD, kDelta>(a, nullptr, nullptr, pf)
                            : p.vt == 32 ? gdn_bwd::launch_state_passes<32, kD, kDelta>(a, nullptr, nullptr, pf)
                                         : gdn_bwd::launch_state_passes<16, kD, kDelta>(a, nullptr, nullptr, pf);
      if (e != cudaSuccess) std::exit(3);
    };
    auto by_delta = [&](auto d) {
      if (p.delta()) passes(d, std::true_type{});
      else passes(d, std::false_type{});
    };
    if (KD == 64) by_delta(std::integral_constant<int, 64>{});
    else by_delta(std::integral_constant<int, 128>{});
    g_dh_words.assign(ws.size() * 2, 0);
    std::memcpy(g_dh_words.data(), ws.data(), ws.size() * 8);
    std::vector<std::uint32_t> dv32((o.dv.size() + 1) / 2, 0);
    if (!o.dv.empty()) std::memcpy(dv32.data(), o.dv.data(), o.dv.size() * 2);
    g_dh_words.insert(g_dh_words.end(), dv32.begin(), dv32.end());
    const std::size_t at = g_dh_words.size();
    g_dh_words.resize(at + o.dh0.size());
    if (!o.dh0.empty()) std::memcpy(g_dh_words.data() + at, o.dh0.data(), o.dh0.size() * 4);
    return o;
  }
  if (glr::cuda::sm90::seg::split(a) && g_h_only < 0) {  // the split state passes: gdn_bwd_mma's own launches (launch_state_passes), on the emulator
    const cudaError_t e = glr::cuda::sm90::gdn_bwd_mma(a, nullptr, nullptr, p.vt);
    if (e != cudaSuccess) {
      std::printf("emu bwd: gdn_bwd_mma: %s | FAIL\n", cudaGetErrorName(e));
      std::exit(1);
    }
    probe_chunk_inputs();
    return o;
  }
  const int NT = (p.T + 63) / 64, BH = p.B * p.hv();
  auto launch_d = [&](auto d, auto dl) {  // the kernels at head dims kD, as gdn_bwd_mma's launch_all
    constexpr int kD = decltype(d)::value;
    constexpr bool kDelta = decltype(dl)::value;
    if (NT > 0) {
      emu::launch(&gdn::wy_kernel<3, kDelta, kD>, NT, BH, gdn::smem_raw, gdn::wy_smem_bytes(3), gdn_bwd::wy_args(a));
    }
    if (g_h_only >= 0) {  // the h pass alone (g_h_only's comment)
      auto h_pass = [&](auto vt) {
        constexpr int kVT = decltype(vt)::value;
        if (NT > 0 && gdn_bwd::launch_h_pass<kVT, kD, kDelta>(a, nullptr, g_h_only == 1, h_on_prefetch()) != cudaSuccess)
          std::exit(3);
      };
      if (p.vt == 64) h_pass(std::integral_constant<int, 64>{});
      else if (p.vt == 32) h_pass(std::integral_constant<int, 32>{});
      else h_pass(std::integral_constant<int, 16>{});
      const std::size_t S = static_cast<std::size_t>(a.chunk_slots()) * p.hv(), d = kD;
      g_h_words.h16.clear();
      auto take16 = [&](const __nv_bfloat16* x, std::size_t n) {
        if (x == nullptr) return;
        const std::size_t at = g_h_words.h16.size();
        g_h_words.h16.resize(at + n);
        std::memcpy(g_h_words.h16.data() + at, x, n * 2);
      };
      take16(a.hc, S * d * d);
      take16(a.vn, S * gdn::C * d);
      take16(a.vnl, S * gdn::C * d);
      const std::size_t es = static_cast<std::size_t>(glr::cuda::sm90::seg::slots(a)) * p.hv() * d * d;
      g_h_words.es.assign(es, 0);
      if (es > 0) std::memcpy(g_h_words.es.data(), a.Es, es * 4);
      return;
    }
    auto state_passes = [&](auto vt) {
      constexpr int kVT = decltype(vt)::value;
      if (NT > 0) launch_h<kVT, kD, kDelta>(a);
      launch_dh<kVT, kD, kDelta>(BH, a);
    };
    if (fused_case(kDelta)) {  // the h pass and the fused sweep (gdn_bwd_fused.cuh), as launch_all with GLR_FUSED_BWD=1
      if (gdn_bwd::launch_fused_bwd<kD, kDelta>(a, nullptr, nullptr, h_on_wgmma() ? 1 : 0) != cudaSuccess) std::exit(3);
    } else if (p.vt == 64)
      state_passes(std::integral_constant<int, 64>{});
    else if (p.vt == 32)
      state_passes(std::integral_constant<int, 32>{});
    else
      state_passes(std::integral_constant<int, 16>{});
    const bool grouped = NT > 0 && !fused_case(kDelta) && launch_chunk<kD, kDelta>(NT, BH, a);
    if (a.gate == 2) emu::launch(&gdn_bwd::dg_head_kernel, p.hv(), 1, gdn_bwd::smem_raw, gdn_bwd::dg_head_smem_bytes, a);
    if (NT > 0 && p.hv() > p.H && !grouped) {  // GVA: the group sums of dq and dk (3 blocks: the grid-stride loop too)
      const int blocks = std::min(3, static_cast<int>((tok * (kD / 4) + 127) / 128));
      emu::launch(&gdn_bwd::group_kernel<kD>, blocks, 1, gdn_bwd::smem_raw, 0, a);
    }
  };
  auto launch = [&](auto d) {
    if (p.delta())
      launch_d(d, std::true_type{});
    else
      launch_d(d, std::false_type{});
  };
  if (KD == 64)
    launch(std::integral_constant<int, 64>{});
  else
    launch(std::integral_constant<int, 128>{});
  probe_chunk_inputs();
  return o;
}

struct Err {
  double rel2 = 0, relmax = 0;
  double elem = 0;  // max_i |x_i - ref_i| / rms(ref): the per-element measure of kgate's atol_rms (glr/contracts/sm90)
  double atol_at_rtol = 0;  // max_i (|x_i - ref_i| - 2^-6 |ref_i|) / rms(ref): the atol_rms kgate needs with rtol 2^-6
  double acc_rel = 0;       // max_i |x_i - ref_i| / |ref_i|: what kgate's accumulation gate bounds (per element)
  bool finite = true;
};
template <class Get>
Err error(Get get, const std::vector<double>& r) {
  double d2 = 0, r2 = 0, dm = 0, rm = 0;
  Err e;
  for (std::size_t i = 0; i < r.size(); ++i) {
    const double x = get(i);
    if (!std::isfinite(x)) e.finite = false;
    d2 += (x - r[i]) * (x - r[i]);
    r2 += r[i] * r[i];
    dm = std::max(dm, std::fabs(x - r[i]));
    rm = std::max(rm, std::fabs(r[i]));
  }
  e.rel2 = r.empty() ? 0 : std::sqrt(d2 / std::max(r2, 1e-300));
  e.relmax = r.empty() ? 0 : dm / std::max(rm, 1e-300);
  const double rms = std::max(std::sqrt(r2 / static_cast<double>(std::max<std::size_t>(r.size(), 1))), 1e-300);
  e.elem = r.empty() ? 0 : dm / rms;
  for (std::size_t i = 0; i < r.size(); ++i) {
    const double d = std::fabs(get(i) - r[i]);
    e.atol_at_rtol = std::max(e.atol_at_rtol, (d - std::ldexp(1.0, -6) * std::fabs(r[i])) / rms);
    e.acc_rel = std::max(e.acc_rel, d / std::max(std::fabs(r[i]), 1e-300));
  }
  return e;
}

struct RefArgs {  // emu::launch passes one argument
  GdnBwdArgs a;
  glr::sm90_bwd_reference::RefOut r;
};
void reference_kernel(RefArgs x) { glr::sm90_bwd_reference::reference(x.a, x.r); }

// The GPU check's reference kernel (bench/glr/sm90_bwd_reference.cuh), emulated, against the host reference:
// two float64 computations of the same gradients in different orders, so they agree to ~1e-13.
bool gpu_reference_agrees(const Shape& p, const Inputs& in, float scale, const Grads& r) {
  namespace ref = glr::sm90_bwd_reference;
  const std::size_t tok = static_cast<std::size_t>(p.B) * p.T * p.H, bh = static_cast<std::size_t>(p.B) * p.H;
  const int NT = (p.T + 63) / 64;
  Grads g;
  g.dq.assign(tok * KD, NAN);
  g.dk.assign(tok * KD, NAN);
  g.dv.assign(tok * VD, NAN);
  g.dg.assign(tok, NAN);
  g.dbeta.assign(tok, NAN);
  g.dh0.assign(bh * KD * VD, NAN);
  std::vector<double> ckpt(bh * (NT + 1) * KD * VD), blk(bh * 65 * KD * VD);
  ref::RefOut ro{g.dq.data(), g.dk.data(), g.dv.data(), g.dg.data(), g.dbeta.data(), g.dh0.data(), ckpt.data(), blk.data()};
  GdnBwdArgs a;
  a.q = in.q.data();
  a.k = in.k.data();
  a.v = in.v.data();
  a.g = in.g.data();
  a.beta = in.beta.data();
  a.h0 = p.h0 ? in.h0.data() : nullptr;
  a.dout = in.dout.data();
  a.dht = p.dht ? in.dht.data() : nullptr;
  a.B = p.B;
  a.T = p.T;
  a.H = p.H;
  a.scale = scale;
  emu::launch(&reference_kernel, static_cast<int>(bh), 1, reinterpret_cast<char*>(ref::ref_smem), ref::kSmemBytes,
              RefArgs{a, ro});
  const std::vector<double>* x[6] = {&g.dq, &g.dk, &g.dv, &g.dg, &g.dbeta, &g.dh0};
  const std::vector<double>* y[6] = {&r.dq, &r.dk, &r.dv, &r.dg, &r.dbeta, &r.dh0};
  double worst = 0;
  bool finite = true;
  for (int i = 0; i < 6; ++i) {
    double d2 = 0, r2 = 0;
    for (std::size_t j = 0; j < y[i]->size(); ++j) {
      finite = finite && std::isfinite((*x[i])[j]);
      d2 += ((*x[i])[j] - (*y[i])[j]) * ((*x[i])[j] - (*y[i])[j]);
      r2 += (*y[i])[j] * (*y[i])[j];
    }
    worst = std::max(worst, r2 > 0 ? std::sqrt(d2 / r2) : std::sqrt(d2));
  }
  const bool ok = finite && worst <= 1e-10;
  std::printf("emu GPU reference (bench/glr/sm90_bwd_reference.cuh) vs host reference B%d T%d H%d: worst rel2 %.1e | %s\n",
              p.B, p.T, p.H, worst, ok ? "PASS" : "FAIL");
  return ok;
}

// make_inputs with Shape::plant's value planted.
Inputs make_planted_inputs(const Shape& p, unsigned seed) {
  Inputs in = make_inputs(p, seed);
  if (p.plant == 3)
    for (int b = 0; b < p.B; ++b) in.g[(static_cast<std::size_t>(b) * p.T + p.T / 2) * p.hv()] = -INFINITY;
  if (p.plant == 1 || p.plant == 2)
    for (int b = 0; b < p.B; ++b) {
      const std::size_t row = ((static_cast<std::size_t>(b) * p.T + p.T - 1) * p.hv()) * VD;  // (b, T - 1, head 0)
      const float x = p.plant == 1 ? NAN : INFINITY;
      in.v[row + (b == 0 ? 0 : VD - 1)] = __float2bfloat16_rn(x);
      in.v[row + 55] = __float2bfloat16_rn(b == 0 ? x : -x);
    }
  return in;
}

// gdn_bwd_mma_refusal against the rule for the chunk kernels' inputs (chunk_inputs_stored), under GLR_FUSED_BWD=1
// (the caller sets it): a workspace carved by the rule is taken (K = V = 128 with the delta rule: dx, dhc, dhcl, dbv,
// vn, vnl, qkt null), and so is one with every piece (chunk_inputs_kept); a null piece is refused wherever a kernel
// reads it: dx, dhc, dhcl or dbv with chunk_inputs_kept, or where the sweep does not take the case (K = V = 64, or
// no delta rule: dhc, dhcl), and h_c (the sweep's) always. Stand-in pointers: nothing is read.
bool check_refusal_rule() {
  using glr::cuda::sm90::GdnBwdArgs;
  auto args = [](int D, bool delta, bool kept) {
    GdnBwdArgs a;
    auto at = [](std::uintptr_t x) { return reinterpret_cast<void*>(x); };
    a.q = a.k = a.v = a.dout = static_cast<const __nv_bfloat16*>(at(0x10000000));
    a.g = a.beta = at(0x20000000);
    a.dq = a.dk = a.dv = static_cast<__nv_bfloat16*>(at(0x30000000));
    a.dg = a.dbeta = at(0x40000000);
    a.B = 1, a.T = 300, a.H = 1, a.D = D, a.delta = delta, a.gate = 1, a.segs = 3, a.chunk_inputs_kept = kept;
    glr::cuda::sm90::gdn_bwd_workspace_carve(a, at(0x50000000));
    return a;
  };
  struct Probe {
    const char* what;
    GdnBwdArgs a;
    bool taken;
  };
  std::vector<Probe> probes;
  auto with = [](GdnBwdArgs a, auto f) { f(a); return a; };
  const GdnBwdArgs fused = args(128, true, false), kept = args(128, true, true), k64 = args(64, true, false),
                   plain = args(128, false, false);
  const bool nulls = !fused.dx && !fused.dhc && !fused.dhcl && !fused.dbv && !fused.vn && !fused.vnl;
  probes.push_back({"K128 delta, carved by the rule (the chunk kernels' inputs null)", fused, true});
  probes.push_back({"K128 delta, every piece carved", kept, true});
  probes.push_back({"K128 delta, every piece carved, dx null", with(kept, [](GdnBwdArgs& a) { a.dx = nullptr; }), false});
  probes.push_back({"K128 delta, every piece carved, dhc null", with(kept, [](GdnBwdArgs& a) { a.dhc = nullptr; }), false});
  probes.push_back({"K128 delta, every piece carved, dhcl null", with(kept, [](GdnBwdArgs& a) { a.dhcl = nullptr; }), false});
  probes.push_back({"K128 delta, every piece carved, dbv null", with(kept, [](GdnBwdArgs& a) { a.dbv = nullptr; }), false});
  probes.push_back({"K128 delta, by the rule, hc null", with(fused, [](GdnBwdArgs& a) { a.hc = nullptr; }), false});
  probes.push_back({"K128 delta, by the rule, Es null", with(fused, [](GdnBwdArgs& a) { a.Es = nullptr; }), false});
  probes.push_back({"K64 delta (no sweep), carved by the rule", k64, true});
  probes.push_back({"K64 delta (no sweep), dx null", with(k64, [](GdnBwdArgs& a) { a.dx = nullptr; }), false});
  probes.push_back({"K64 delta (no sweep), dbv null", with(k64, [](GdnBwdArgs& a) { a.dbv = nullptr; }), false});
  probes.push_back({"K128 Mamba2 (no sweep), dhcl null", with(plain, [](GdnBwdArgs& a) { a.dhcl = nullptr; }), false});
  bool ok = nulls && k64.dx && k64.dhc && plain.dhc;
  for (const Probe& p : probes) {
    const char* why = glr::cuda::sm90::gdn_bwd_mma_refusal(p.a);
    const bool good = (why == nullptr) == p.taken;
    ok = ok && good;
    if (!good) std::printf("emu bwd refusal: %s: %s, expected %s | FAIL\n", p.what, why ? why : "taken", p.taken ? "taken" : "refused");
  }
  std::printf("emu bwd refusal under GLR_FUSED_BWD=1: the chunk kernels' inputs null where the rule carves none (%s), "
              "%zu workspaces taken or refused as the rule says | %s\n", nulls ? "yes" : "NO", probes.size(),
              ok ? "PASS" : "FAIL");
  std::fflush(stdout);
  return ok;
}

// The fused path (fused_case: the h pass, split or not pass A' in its Es-only mode and the reverse combine, the fused
// sweep) writes none of the chunk kernels' inputs, which the workspace then does not carve (chunk_inputs_stored):
// the case run as the launcher carves it (dx, dhc, dhcl, dbv, vn, vnl null: a store through one of them faults), then
// with every piece carved over the 0x7f poison (g_chunk_inputs_kept): dX, dh', its residual and the dbeta partials
// must still hold only the poison (the h pass stores V_new there, as for the chunk kernels: not counted), and every
// output must be word for word the run's without the pieces.
bool run_fused_untouched(const Shape& p, unsigned seed) {
  use_dims(p.D);
  if (!fused_case(p.delta())) return true;
  const Inputs in = make_planted_inputs(p, seed);
  const float scale = inputs_kind() == InputKind::check ? 1.0f / std::sqrt(static_cast<float>(KD)) : 0.125f;
  const Outputs absent = run_kernels(p, in, scale);
  g_chunk_inputs_kept = true;
  const Outputs kept = run_kernels(p, in, scale);
  g_chunk_inputs_kept = false;
  std::size_t words = 0;
  auto cmp = [&](const auto& x, const auto& y) { words += x.size() != y.size() ? 1 : word_diff(x, y).words; };
  for_gradients(kept, absent, cmp);
  const bool ok = g_chunk_inputs_bytes > 0 && g_chunk_inputs_touched == 0 && words == 0;
  char hvs[24] = "", segs[24] = "";
  if (p.hv() != p.H) std::snprintf(hvs, sizeof hvs, " HV%d", p.hv());
  if (p.segs > 1) std::snprintf(segs, sizeof segs, " split %d", p.segs);
  std::printf("emu bwd fused B%d T%-4d H%d%s h0=%d dht=%d mu=%+.0f vt=%-2d%s | the chunk kernels' inputs carved and "
              "poisoned: dX, dh', residual, dbeta partials bytes written %zu of %zu; outputs words differing from the "
              "run without them %zu | %s\n",
              p.B, p.T, p.H, hvs, p.h0 ? 1 : 0, p.dht ? 1 : 0, p.mu, p.vt, segs, g_chunk_inputs_touched,
              g_chunk_inputs_bytes, words, ok ? "PASS" : "FAIL");
  std::fflush(stdout);
  return ok;
}

// The h pass on wgmma (GLR_H_WGMMA's: state_t_wgmma_kernel's h mode; split: pass A on state_t_wgmma_kernel too)
// against h_kernel (split: pass A on state_t_kernel) on the same case: every word of h_c, V_new and its residual, and
// with segments of Es (pass A's end states through combine_kernel). On the emulator both instructions round once per
// k16 step and the wgmma pass issues h_kernel's products in its order per element: 0 words differ (a -0 that reads
// +0, counted apart, aside), but in a chunk whose X is not finite (a planted NaN / Inf: V_new there by FMAs over the
// whole chunk, where h_kernel keeps the tiles left of the diagonal on mma.sync): reported, not failed (run judges
// those cases' outputs against float64).
bool run_h_compare(const Shape& p, unsigned seed) {
  if (skip_case(p.D)) return true;
  use_dims(p.D);
  const Inputs in = make_planted_inputs(p, seed);
  const float scale = inputs_kind() == InputKind::check ? 1.0f / std::sqrt(static_cast<float>(KD)) : 0.125f;
  g_h_only = 0;
  run_kernels(p, in, scale);
  const HWords mma = g_h_words;
  g_h_only = 1;
  run_kernels(p, in, scale);
  const HWords wg = g_h_words;
  g_h_only = -1;
  std::size_t words = 0, zeros = 0, es_words = 0;
  for (std::size_t i = 0; i < mma.h16.size(); ++i)
    if (mma.h16[i] != wg.h16[i]) ++((mma.h16[i] | wg.h16[i]) == 0x8000u ? zeros : words);
  for (std::size_t i = 0; i < mma.es.size(); ++i) es_words += mma.es[i] != wg.es[i];
  const bool same = mma.h16.size() == wg.h16.size() && mma.es.size() == wg.es.size() && words == 0 && es_words == 0;
  const bool ok = same || p.plant != 0;
  char hvs[24] = "", segs[24] = "";
  if (p.hv() != p.H) std::snprintf(hvs, sizeof hvs, " HV%d", p.hv());
  if (p.segs > 1) std::snprintf(segs, sizeof segs, " split %d", p.segs);
  std::printf("emu bwd h pass%s%s B%d T%-4d H%d%s h0=%d mu=%+.0f vt=%-2d%s%s | wgmma vs h_kernel: h_c, V_new, residual "
              "words differing %zu of %zu (-0/+0 %zu), Es %zu of %zu%s | %s\n",
              member_tag(p.member), dims_tag(), p.B, p.T, p.H, hvs, p.h0 ? 1 : 0, p.mu, p.vt, segs,
              p.plant == 1 ? " NaN in v at T-1" : p.plant == 2 ? " +-Inf in v at T-1" : p.plant == 3 ? " g=-Inf at T/2" : "",
              words, mma.h16.size(), zeros, es_words, mma.es.size(), p.plant != 0 && !same ? " (planted: reported)" : "",
              ok ? "PASS" : "FAIL");
  std::fflush(stdout);
  return ok;
}

// h_kernel's prefetching schedule (GLR_H_PREFETCH's) against its plain one on the same case, both on h_kernel (split:
// pass A as GLR_FWD_WGMMA says, the same for both): every word of h_c, V_new and its residual and, split, of Es. The
// same products in the same order: 0 words may differ, planted NaN / Inf included.
std::size_t g_hp_compares = 0, g_hp_words = 0;
bool run_h_prefetch_compare(const Shape& p, unsigned seed) {
  if (skip_case(p.D)) return true;
  use_dims(p.D);
  const Inputs in = make_planted_inputs(p, seed);
  const float scale = inputs_kind() == InputKind::check ? 1.0f / std::sqrt(static_cast<float>(KD)) : 0.125f;
  g_h_only = 0;
  h_prefetch = 0;
  run_kernels(p, in, scale);
  const HWords plain = g_h_words;
  h_prefetch = 1;
  run_kernels(p, in, scale);
  const HWords pf = g_h_words;
  g_h_only = -1;
  h_prefetch = -1;
  std::size_t words = 0, es_words = 0;
  for (std::size_t i = 0; i < plain.h16.size() && i < pf.h16.size(); ++i) words += plain.h16[i] != pf.h16[i];
  for (std::size_t i = 0; i < plain.es.size() && i < pf.es.size(); ++i) es_words += plain.es[i] != pf.es[i];
  const bool ok = plain.h16.size() == pf.h16.size() && plain.es.size() == pf.es.size() && words == 0 && es_words == 0;
  g_hp_words += words + es_words;
  ++g_hp_compares;
  char hvs[24] = "", segs[24] = "";
  if (p.hv() != p.H) std::snprintf(hvs, sizeof hvs, " HV%d", p.hv());
  if (p.segs > 1) std::snprintf(segs, sizeof segs, " split %d", p.segs);
  std::printf("emu bwd h pass%s%s B%d T%-4d H%d%s h0=%d mu=%+.0f vt=%-2d%s%s | prefetching vs plain h_kernel: h_c, V_new, "
              "residual words differing %zu of %zu, Es %zu of %zu | %s\n",
              member_tag(p.member), dims_tag(), p.B, p.T, p.H, hvs, p.h0 ? 1 : 0, p.mu, p.vt, segs,
              p.plant == 1 ? " NaN in v at T-1" : p.plant == 2 ? " +-Inf in v at T-1" : p.plant == 3 ? " g=-Inf at T/2" : "",
              words, plain.h16.size(), es_words, plain.es.size(), ok ? "PASS" : "FAIL");
  std::fflush(stdout);
  return ok;
}

// dh_wgmma_kernel's prefetching schedule (GLR_DH_PREFETCH's) against its plain one on the same case (the state passes
// alone, split or not: g_dh_only's words, the whole workspace, dv and dh0). The same products in the same order: 0
// words may differ, planted NaN / Inf included.
std::size_t g_dhp_compares = 0, g_dhp_words = 0;
bool run_dh_prefetch_compare(const Shape& p, unsigned seed) {
  if (skip_case(p.D)) return true;
  use_dims(p.D);
  Inputs in = make_planted_inputs(p, seed);
  if (p.plant == 4)  // (this comparison only) NaN and +-Inf in dO at the last token of every sequence, head 0
    for (int b = 0; b < p.B; ++b) {
      const std::size_t row = ((static_cast<std::size_t>(b) * p.T + p.T - 1) * p.hv()) * VD;
      in.dout[row + 3] = __float2bfloat16_rn(NAN);
      in.dout[row + VD - 9] = __float2bfloat16_rn(b == 0 ? INFINITY : -INFINITY);
    }
  const float scale = inputs_kind() == InputKind::check ? 1.0f / std::sqrt(static_cast<float>(KD)) : 0.125f;
  g_dh_only = 0;
  run_kernels(p, in, scale);
  const std::vector<std::uint32_t> plain = g_dh_words;
  g_dh_only = 1;
  run_kernels(p, in, scale);
  const std::vector<std::uint32_t> pf = g_dh_words;
  g_dh_only = -1;
  std::size_t words = 0;
  for (std::size_t i = 0; i < plain.size() && i < pf.size(); ++i) words += plain[i] != pf[i];
  const bool ok = plain.size() == pf.size() && words == 0;
  g_dhp_words += words;
  ++g_dhp_compares;
  char hvs[24] = "", segs[24] = "";
  if (p.hv() != p.H) std::snprintf(hvs, sizeof hvs, " HV%d", p.hv());
  if (p.segs > 1) std::snprintf(segs, sizeof segs, " split %d", p.segs);
  std::printf("emu bwd dh pass%s%s B%d T%-4d H%d%s h0=%d dht=%d mu=%+.0f vt=%-2d%s%s | prefetching vs plain "
              "dh_wgmma_kernel: workspace, dv, dh0 words differing %zu of %zu | %s\n",
              member_tag(p.member), dims_tag(), p.B, p.T, p.H, hvs, p.h0 ? 1 : 0, p.dht ? 1 : 0, p.mu, p.vt, segs,
              p.plant == 1   ? " NaN in v at T-1"
              : p.plant == 2 ? " +-Inf in v at T-1"
              : p.plant == 3 ? " g=-Inf at T/2"
              : p.plant == 4 ? " NaN, +-Inf in dO at T-1"
                             : "",
              words, plain.size(), ok ? "PASS" : "FAIL");
  std::fflush(stdout);
  return ok;
}

// The split cases' largest split-vs-unsplit differences (normwise relative; max |diff| / rms), for the summary.
double g_split_worst = 0, g_split_worst_elem = 0;

bool run(const Shape& p, unsigned seed, bool twice, bool check_reference = false) {
  if (skip_case(p.D)) return true;
  use_dims(p.D);
  check_reference = check_reference && p.D == 128;  // the GPU check's reference kernel is written for K = V = 128
  const Inputs in = make_planted_inputs(p, seed);
  const float scale = inputs_kind() == InputKind::check ? 1.0f / std::sqrt(static_cast<float>(KD)) : 0.125f;
  long last0[8];  // which value head of its group finished each (chunk, q/k head) tile last (group_sum_last)
  for (int j = 0; j < 8; ++j) last0[j] = gdn_bwd::emu_group_last[j].load();
  const Outputs o = run_kernels(p, in, scale);
  std::string last_by;
  for (int j = 0; j < 8; ++j)
    if (const long n = gdn_bwd::emu_group_last[j].load() - last0[j]; n > 0)
      last_by += (last_by.empty() ? " | last block of a group: j" : ", j") + std::to_string(j) + " x" + std::to_string(n);
  const Grads r = reference(p, in, scale);
  const bool ref_ok = !check_reference || gpu_reference_agrees(p, in, scale, r);
  const double u = std::ldexp(1.0, -9);
  auto bfget = [](const std::vector<__nv_bfloat16>& x) { return [&x](std::size_t i) { return f(x[i]); }; };
  auto fget = [](const std::vector<float>& x) { return [&x](std::size_t i) { return static_cast<double>(x[i]); }; };
  const std::vector<double> rdg = p.gate() == 2 ? head_sums(r.dg, p.hv()) : r.dg;  // RetNet: dg per value head
  const Err e[6] = {error(bfget(o.dq), r.dq),       error(bfget(o.dk), r.dk),       error(bfget(o.dv), r.dv),
                    error(fget(o.dg), rdg),          error(fget(o.dbeta), r.dbeta), p.h0 ? error(fget(o.dh0), r.dh0) : Err{}};
  const char* names[6] = {"dq", "dk", "dv", "dg", "dbeta", "dh0"};
  const double bound[6] = {8 * u, 8 * u, 8 * u, 16 * u, 8 * u, 8 * u};
  bool ok = true;
  std::string line;
  char buf[128];
  for (int i = 0; i < 6; ++i) {
    if ((i == 3 && p.gate() == 0) || (i == 4 && !p.delta())) {  // no dg / no dbeta: every element still the NaN poison
      bool untouched = true;
      for (float x : i == 3 ? o.dg : o.dbeta) untouched = untouched && std::isnan(x);
      ok = ok && untouched;
      line += std::string(" ") + names[i] + (untouched ? " unwritten" : " WRITTEN!");
      continue;
    }
    if ((p.plant == 1 || p.plant == 2) && (i == 0 || i == 1 || i == 4 || (i == 3 && p.gate() == 2))) {
      // non-finite in the exact backward too (RetNet's dg: the sum holds the planted token's dg_t... and the rest)
      line += std::string(" ") + names[i] + " -";
      continue;
    }
    if (i == 5 && !p.h0) {
      line += " dh0 -";
      continue;
    }
    // With the contract's inputs also kgate's per-element bound (glr/contracts/sm90/gated_deltanet_bwd.toml):
    // |x - ref| <= 2^-6 |ref| + 2^-4 rms(ref).
    const bool gi = e[i].finite && e[i].rel2 <= bound[i] &&
                    (inputs_kind() != InputKind::contract || e[i].atol_at_rtol <= 0.0625);
    ok = ok && gi;
    std::snprintf(buf, sizeof buf, " %s %.2e%s", names[i], e[i].rel2, gi ? "" : (e[i].finite ? "!" : "!nan"));
    if (inputs_kind() == InputKind::contract)
      std::snprintf(buf + std::strlen(buf), sizeof buf - std::strlen(buf), " (elem %.1e, atol_rms at rtol 2^-6 %.1e)",
                    e[i].elem, e[i].atol_at_rtol);
    if (inputs_kind() == InputKind::accumulation)
      std::snprintf(buf + std::strlen(buf), sizeof buf - std::strlen(buf), " (max rel %.1e)", e[i].acc_rel);
    line += buf;
  }
  if (std::getenv("GLR_EMU_WORST") != nullptr) {  // debugging aid: where dk's largest errors (relative to rms) sit
    const std::vector<double>& rk = r.dk;
    double r2 = 0;
    for (double x : rk) r2 += x * x;
    const double rms = std::sqrt(r2 / static_cast<double>(rk.size()));
    std::vector<std::pair<double, std::size_t>> w;
    for (std::size_t i = 0; i < rk.size(); ++i) w.push_back({std::fabs(f(o.dk[i]) - rk[i]) / rms, i});
    std::sort(w.begin(), w.end(), [](auto& x, auto& y) { return x.first > y.first; });
    for (int j = 0; j < 8; ++j) {
      const std::size_t i = w[j].second, d = i % KD, tk = i / KD;
      std::printf("  dk worst %d: err/rms %.3e at b %zu t %zu h %zu d %zu: got %.4e ref %.4e\n", j, w[j].first,
                  tk / (p.T * p.H), (tk / p.H) % p.T, tk % p.H, d, f(o.dk[i]), rk[i]);
    }
  }
  if (on_wgmma == 1) {
    // The same case with the mma.sync kernels (chunk_kernel, dh_kernel): the words that differ and the largest
    // difference relative to the rms of the mma.sync output, per output. On the emulator both instructions round
    // once per k16 step and the wgmma kernels issue their k-steps in the mma.sync kernels' order, so expect 0 (a
    // -0 / +0 aside); on a GPU, rounding-level differences.
    on_wgmma = 0;
    const Outputs om = run_kernels(p, in, scale);
    on_wgmma = 1;
    std::size_t words = 0;
    double worst = 0;
    auto cmp = [&](const auto& x, const auto& y) {
      const WordDiff d = word_diff(x, y);
      words += d.words;
      worst = std::max(worst, d.worst);
    };
    for_gradients(o, om, cmp);
    const bool near = worst <= 1.0 / 256;  // bf16 rounding level
    std::snprintf(buf, sizeof buf, " | wgmma vs mma.sync chunk+dh kernels: %zu words differ, max |diff|/rms %.1e%s", words,
                  worst, near ? "" : "!");
    line += buf;
    ok = ok && near;
  }
  if (fused_mode == 1 && fused_case(p.delta()) && p.segs == 1) {
    // The same case on today's path (the h pass, dh_kernel, chunk_wgmma_kernel): per output the words that differ and
    // the largest difference relative to the rms of today's output. The fused sweep issues every product in the
    // order of dh_wgmma_kernel<64> and chunk_wgmma_kernel, which equal dh_kernel's word for word on the emulator
    // (a -0 / +0 and the NaN spread of a planted NaN aside), so expect 0; at state slices of 32 or 16 columns
    // today's dbeta sums 4 or 8 per-slice partials where the fused kernel sums 2 (its halves): dbeta's words move
    // by rounding there.
    fused_mode = 0;
    const Outputs ot = run_kernels(p, in, scale);
    fused_mode = 1;
    double worst = 0;
    std::string counts;
    auto cmp = [&](const char* name, const auto& x, const auto& y) {
      const WordDiff d = word_diff(x, y);
      worst = std::max(worst, d.worst);
      counts += std::string(" ") + name + " " + std::to_string(d.words);
    };
    cmp("dq", o.dq, ot.dq);
    cmp("dk", o.dk, ot.dk);
    cmp("dv", o.dv, ot.dv);
    cmp("dg", o.dg, ot.dg);
    cmp("dbeta", o.dbeta, ot.dbeta);
    cmp("dh0", o.dh0, ot.dh0);
    // planted NaN / Inf: the NaN spread may differ (the wgmma kernels' documented 0 x Inf corner), judged above
    const bool near = worst <= 1.0 / 256 || p.plant == 1 || p.plant == 2;
    std::snprintf(buf, sizeof buf, " | fused vs today's, words differ:%s; max |diff|/rms %.1e%s", counts.c_str(), worst,
                  near ? "" : "!");
    line += buf;
    ok = ok && near;
  }
  if (dh2_mode == 1 && p.segs == 1 && p.vt == 64 && p.delta() && !fused_case(p.delta())) {
    // The same case with today's dh pass (dh2_mode 0: dh_wgmma_kernel, or dh_kernel under GLR_DH_WGMMA=0). dh2_kernel's
    // dh update is reorganized (e^{G_L} dh' + Q^T y + K^T z0 - W^T u: other roundings), so from the second chunk from
    // the end on every output moves by rounding: per output the words that differ, the normwise relative difference
    // (within the output's float64 bound: 8 u, dg 16 u; each run is within it of the exact gradient) and max |diff|
    // / rms; the non-finite words must be the same ones (a planted NaN / Inf spreads as today).
    dh2_mode = 0;
    const Outputs ot = run_kernels(p, in, scale);
    dh2_mode = 1;
    double worst = 0;
    bool finite_alike = true, within = true;
    std::string counts;
    auto cmp = [&](const char* name, const auto& x, const auto& y, double bnd) {
      const WordDiff d = word_diff(x, y);
      double d2 = 0, r2 = 0;
      for (std::size_t i = 0; i < x.size(); ++i) {
        const double xv = static_cast<double>(static_cast<float>(x[i])), yv = static_cast<double>(static_cast<float>(y[i]));
        if (std::isfinite(xv) != std::isfinite(yv)) finite_alike = false;
        if (!std::isfinite(xv) || !std::isfinite(yv)) continue;
        d2 += (xv - yv) * (xv - yv);
        r2 += yv * yv;
      }
      const double rel = r2 > 0 ? std::sqrt(d2 / r2) : (d2 > 0 ? INFINITY : 0);
      if (rel > bnd) within = false;
      if (std::isfinite(d.worst)) worst = std::max(worst, d.worst);
      char b[96];
      std::snprintf(b, sizeof b, " %s %zu/%zu (%.1e)", name, d.words, x.size(), rel);
      counts += b;
    };
    const double u = 1.0 / 512;
    cmp("dq", o.dq, ot.dq, 8 * u);
    cmp("dk", o.dk, ot.dk, 8 * u);
    cmp("dv", o.dv, ot.dv, 8 * u);
    if (p.gate() != 0) cmp("dg", o.dg, ot.dg, 16 * u);
    cmp("dbeta", o.dbeta, ot.dbeta, 8 * u);
    if (p.h0) cmp("dh0", o.dh0, ot.dh0, 8 * u);
    std::snprintf(buf, sizeof buf, "; max |diff|/rms %.1e%s%s", worst, finite_alike ? "" : " NONFINITE-MISMATCH",
                  within ? "" : " OVER");
    line += " | dh2 vs today's dh pass, words differ (rel2):" + counts + buf;
    ok = ok && finite_alike && within;
  }
  if (p.segs > 1) {
    // The same case unsplit: the split passes reorder only the state's sums (a segment's state or gradient from 0,
    // then the maps M_s carry the rest), so the outputs differ by rounding. Per output the normwise relative
    // difference, within the output's bound against float64 above (8 u, dg 16 u: each run is within it of the
    // exact gradient, and their roundings are independent), and max |diff| / rms; both finite where either is.
    Shape pu = p;
    pu.segs = 1;
    const Outputs ou = run_kernels(pu, in, scale);
    double worst = 0, worst_elem = 0;
    bool finite_alike = true, within = true;
    auto cmp = [&](const auto& x, const auto& y, double bnd) {
      double d2 = 0, r2 = 0, dm = 0;
      for (std::size_t i = 0; i < x.size(); ++i) {
        const double xv = static_cast<double>(static_cast<float>(x[i])), yv = static_cast<double>(static_cast<float>(y[i]));
        if (std::isfinite(xv) != std::isfinite(yv)) finite_alike = false;
        if (!std::isfinite(xv) || !std::isfinite(yv)) continue;
        d2 += (xv - yv) * (xv - yv);
        r2 += yv * yv;
        dm = std::max(dm, std::fabs(xv - yv));
      }
      if (r2 > 0) {
        within = within && std::sqrt(d2 / r2) <= bnd;
        worst = std::max(worst, std::sqrt(d2 / r2));
        worst_elem = std::max(worst_elem, dm / std::sqrt(r2 / static_cast<double>(x.size())));
      }
    };
    cmp(o.dq, ou.dq, bound[0]);
    cmp(o.dk, ou.dk, bound[1]);
    cmp(o.dv, ou.dv, bound[2]);
    cmp(o.dg, ou.dg, bound[3]);
    cmp(o.dbeta, ou.dbeta, bound[4]);
    cmp(o.dh0, ou.dh0, bound[5]);
    const bool near = finite_alike && within;
    g_split_worst = std::max(g_split_worst, worst);
    g_split_worst_elem = std::max(g_split_worst_elem, worst_elem);
    std::snprintf(buf, sizeof buf, " | split %d len %d%s vs unsplit: rel2 %.1e, max |diff|/rms %.1e%s", p.segs,
                  p.seg_len, p.dh_split ? "" : " (h only)", worst, worst_elem, near ? "" : "!");
    line += buf;
    ok = ok && near;
  }
  bool same = true;
  if (twice) {
    const Outputs o2 = run_kernels(p, in, scale);
    same = std::memcmp(o.dq.data(), o2.dq.data(), o.dq.size() * 2) == 0 &&
           std::memcmp(o.dk.data(), o2.dk.data(), o.dk.size() * 2) == 0 &&
           std::memcmp(o.dv.data(), o2.dv.data(), o.dv.size() * 2) == 0 &&
           std::memcmp(o.dg.data(), o2.dg.data(), o.dg.size() * 4) == 0 &&
           std::memcmp(o.dbeta.data(), o2.dbeta.data(), o.dbeta.size() * 4) == 0 &&
           std::memcmp(o.dh0.data(), o2.dh0.data(), o.dh0.size() * 4) == 0;
    line += same ? " | bitwise equal over 2 runs" : " | 2 runs DIFFER";
    ok = ok && same;
  }
  if (p.hv() > p.H) {
    // GVA against HV = H: the same problem with H = HV and each value head's q/k rows copied from its group's head
    // runs the same per-value-head arithmetic, so dv, dg, dbeta and dh0 must agree bit for bit (dq and dk differ:
    // summed over the group in fp32 before the one rounding).
    Shape p2 = p;
    p2.H = p.hv();
    p2.HV = 0;
    Inputs in2 = in;
    const int grp = p.hv() / p.H;
    const std::size_t bt = static_cast<std::size_t>(p.B) * p.T;
    in2.q.resize(bt * p.hv() * KD);
    in2.k.resize(bt * p.hv() * KD);
    for (std::size_t r = 0; r < bt; ++r)
      for (int hv = 0; hv < p.hv(); ++hv)
        for (int d = 0; d < KD; ++d) {
          in2.q[(r * p.hv() + hv) * KD + d] = in.q[(r * p.H + hv / grp) * KD + d];
          in2.k[(r * p.hv() + hv) * KD + d] = in.k[(r * p.H + hv / grp) * KD + d];
        }
    const Outputs o2 = run_kernels(p2, in2, scale);
    const bool rep = std::memcmp(o.dv.data(), o2.dv.data(), o.dv.size() * 2) == 0 &&
                     std::memcmp(o.dg.data(), o2.dg.data(), o.dg.size() * 4) == 0 &&
                     std::memcmp(o.dbeta.data(), o2.dbeta.data(), o.dbeta.size() * 4) == 0 &&
                     std::memcmp(o.dh0.data(), o2.dh0.data(), o.dh0.size() * 4) == 0;
    line += rep ? " | dv dg dbeta dh0 = HV=H run bitwise" : " | dv dg dbeta dh0 DIFFER from the HV=H run";
    ok = ok && rep;
    if (!last_by.empty()) {  // the chunk kernel summed the groups (group_sum_last): group_kernel's words, every one
      force_group_kernel = true;
      const Outputs o3 = run_kernels(p, in, scale);
      force_group_kernel = false;
      const bool same_qk = std::memcmp(o.dq.data(), o3.dq.data(), o.dq.size() * 2) == 0 &&
                           std::memcmp(o.dk.data(), o3.dk.data(), o.dk.size() * 2) == 0;
      line += same_qk ? " | dq dk = group_kernel's bitwise" : " | dq dk DIFFER from group_kernel's";
      ok = ok && same_qk;
    }
  }
  line += last_by;
  line += gradient_digest(o);
  char hvs[24] = "";
  if (p.hv() != p.H) std::snprintf(hvs, sizeof hvs, " HV%d", p.hv());
  std::printf("emu bwd%s%s B%d T%-4d H%d%s h0=%d dht=%d mu=%+.0f vt=%-2d%s%s | rel2%s | %s\n", member_tag(p.member), dims_tag(), p.B, p.T, p.H, hvs, p.h0 ? 1 : 0,
              p.dht ? 1 : 0, p.mu, p.vt, p.deltanet() ? " deltanet (gate 0)" : "",
              p.plant == 1 ? " NaN in v at T-1" : p.plant == 2 ? " +-Inf in v at T-1" : p.plant == 3 ? " g=-Inf at T/2" : "", line.c_str(), ok ? "PASS" : "FAIL");
  std::fflush(stdout);
  return ok && ref_ok;
}

// ---------------------------------------------------------------------------------------------------------
// Planted NaN / +-Inf judged by kgate's rule (src/kgate/compare/compare.cpp check_nonfinite and spread.cpp
// allowed_spread, as glr/contracts/sm90/*_bwd.toml set it: spread along T both ways, dense batch rows as the
// segments, inf_may_become_nan). Per output element, with e the float64 oracle's value, r it rounded to the
// output's dtype and x the kernel's:
//   e NaN: planted NaN (nan mode): x must be NaN; planted Inf (inf mode): x must not be finite.
//   inf mode, e +-Inf (or |e| > 2 max): x must be the same signed Inf, or NaN (an oracle Inf may come out NaN).
//   x finite: fine. x not finite: only where allowed, i.e. the oracle's line (all indices but t fixed, within the
//   batch row) holds a non-finite r (inf mode: or an |e| >= max / 2); inf mode also lets an |e| >= max / 2 go.
//   Outputs without a T axis (dh0) follow the oracle exactly: allowed only at its own non-finite elements.
// So where the oracle's line is all finite, the kernel's line must be all finite.
struct RuleOut {
  const char* name;
  int n, inner;        // the T axis' length (0: no T axis) and the elements after it; the batch row before it
  double max_finite;   // of the output's dtype
  bool bf16;           // rounded to bf16 (else f32)
};
// Returns the number of offending elements; the first is described in `first`.
template <class Get>
std::size_t rule_offenders(const RuleOut& o, Get got, const std::vector<double>& ref, bool inf_mode, std::string& first) {
  const std::size_t N = ref.size();
  auto rounded = [&](double e) {
    const float f32 = static_cast<float>(e);
    return o.bf16 ? static_cast<double>(__bfloat162float(__float2bfloat16_rn(f32))) : static_cast<double>(f32);
  };
  std::vector<std::uint8_t> allowed(N, 0);
  for (std::size_t i = 0; i < N; ++i)
    allowed[i] = !std::isfinite(rounded(ref[i])) || (inf_mode && std::fabs(ref[i]) >= o.max_finite / 2);
  if (o.n > 0) {  // a line: (row, fixed inner index), t = 0 .. n - 1; any seed allows the whole line (both ways)
    const std::size_t line = static_cast<std::size_t>(o.n) * o.inner;
    for (std::size_t row = 0; row < N / line; ++row)
      for (int in = 0; in < o.inner; ++in) {
        bool seed = false;
        for (int t = 0; t < o.n; ++t) seed = seed || allowed[row * line + static_cast<std::size_t>(t) * o.inner + in];
        if (seed)
          for (int t = 0; t < o.n; ++t) allowed[row * line + static_cast<std::size_t>(t) * o.inner + in] = 1;
      }
  }
  std::size_t bad = 0;
  for (std::size_t i = 0; i < N; ++i) {
    const double e = ref[i], x = got(i);
    const char* why = nullptr;
    if (std::isnan(e)) {
      if (inf_mode ? std::isfinite(x) : !std::isnan(x)) why = inf_mode ? "finite where the oracle is NaN" : "NaN masked";
    } else if (inf_mode && (std::isinf(e) || std::fabs(e) > 2 * o.max_finite)) {
      if (!(std::isnan(x) || (std::isinf(x) && std::signbit(x) == std::signbit(e)))) why = "Inf mismatch";
    } else if (!std::isfinite(x) && !allowed[i]) {
      if (!inf_mode || std::fabs(e) < o.max_finite / 2) why = "unexpected non-finite";
    }
    if (why == nullptr) continue;
    if (bad++ == 0) {
      char buf[160];
      const std::size_t line = o.n > 0 ? static_cast<std::size_t>(o.n) * o.inner : N;
      std::snprintf(buf, sizeof buf, "%s[row %zu, t %d, %d]: %s (oracle %.4g, got %g)", o.name, i / line,
                    o.n > 0 ? static_cast<int>(i % line / o.inner) : -1, o.n > 0 ? static_cast<int>(i % o.inner) : static_cast<int>(i % line),
                    why, e, x);
      first = buf;
    }
  }
  return bad;
}

// The rule itself must be able to fail: hand-made lines it has to reject and accept (a check of the check).
bool rule_selftest() {
  const RuleOut o{"x", 3, 1, 3.4028234663852886e38, false};
  auto judge = [&](std::vector<double> ref, std::vector<double> got, bool inf_mode) {
    std::string first;
    return rule_offenders(o, [&](std::size_t i) { return got[i]; }, ref, inf_mode, first);
  };
  const double nan = std::nan(""), inf = INFINITY;
  bool ok = true;
  ok = ok && judge({1, 2, 3}, {1, nan, 3}, false) == 1;       // oracle line finite: no NaN anywhere in it
  ok = ok && judge({1, 2, 3}, {1, 2, 3}, false) == 0;
  ok = ok && judge({nan, 2, 3}, {nan, nan, inf}, false) == 0;  // a line the oracle reaches: anything non-finite
  ok = ok && judge({nan, 2, 3}, {5, 2, 3}, false) == 1;       // ... but the oracle's NaN itself must stay NaN
  ok = ok && judge({nan, 2, 3}, {inf, 2, 3}, true) == 0;      // inf mode: any non-finite value there
  ok = ok && judge({inf, 2, 3}, {nan, 2, 3}, true) == 0;      // an oracle Inf may come out NaN
  ok = ok && judge({inf, 2, 3}, {-inf, 2, 3}, true) == 1;     // not the other sign
  ok = ok && judge({1, 2, 3, 4, 5, 6}, {1, 2, 3, 4, nan, 6}, false) == 1;  // two rows: row 1 all finite
  ok = ok && judge({nan, 2, 3, 4, 5, 6}, {nan, 2, 3, 4, nan, 6}, false) == 1;  // row 0's NaN does not allow row 1
  const RuleOut s{"s", 0, 1, 3.4028234663852886e38, false};    // no T axis: exactly the oracle's set
  std::string first;
  std::vector<double> ref{nan, 2, 3}, got{nan, nan, 3};
  ok = ok && rule_offenders(s, [&](std::size_t i) { return got[i]; }, ref, false, first) == 1;
  std::printf("planted-rule self-test (lines it must reject and accept) | %s\n", ok ? "PASS" : "FAIL");
  return ok;
}

enum class PlantIn { q, k, v, g, beta, h0, dout, dht };
const char* plant_name(PlantIn x) {
  constexpr const char* n[] = {"q", "k", "v", "g", "beta", "h0", "dout", "dht"};
  return n[static_cast<int>(x)];
}

// One value (NaN, +Inf or -Inf) planted at one element of one input of batch row 0, head 0: token t of the token
// tensors (q, k at key dim 5, v, dout at value dim 9, g, beta), element (3, 7) of h0 and dht. Every output judged
// by the rule above against the float64 reference.
bool run_rule(const Shape& p, unsigned seed, PlantIn where, int t, float value) {
  if (skip_case(p.D)) return true;
  use_dims(p.D);
  Inputs in = make_inputs(p, seed);
  const int HV = p.hv();
  const std::size_t tq = static_cast<std::size_t>(t) * p.H, tv = static_cast<std::size_t>(t) * HV;  // batch row 0, head 0
  const __nv_bfloat16 vb = __float2bfloat16_rn(value);
  switch (where) {
    case PlantIn::q: in.q[tq * KD + 5] = vb; break;
    case PlantIn::k: in.k[tq * KD + 5] = vb; break;
    case PlantIn::v: in.v[tv * VD + 9] = vb; break;
    case PlantIn::dout: in.dout[tv * VD + 9] = vb; break;
    case PlantIn::g:
      if (p.gate() == 2)  // RetNet: the one g of value head 0, at every token (the kernels read in.g[0])
        for (std::size_t i = 0; i < in.g.size(); i += HV) in.g[i] = value;
      else
        in.g[tv] = value;
      break;
    case PlantIn::beta: in.beta[tv] = value; break;
    case PlantIn::h0: in.h0[3 * VD + 7] = value; break;
    case PlantIn::dht: in.dht[3 * VD + 7] = value; break;
  }
  const float scale = inputs_kind() == InputKind::check ? 1.0f / std::sqrt(static_cast<float>(KD)) : 0.125f;
  const Outputs o = run_kernels(p, in, scale);
  const Grads r = reference(p, in, scale);
  const bool inf_mode = !std::isnan(value);
  constexpr double bf16_max = 3.3895313892515355e38, f32_max = 3.4028234663852886e38;
  auto bfget = [](const std::vector<__nv_bfloat16>& x) { return [&x](std::size_t i) { return f(x[i]); }; };
  auto fget = [](const std::vector<float>& x) { return [&x](std::size_t i) { return static_cast<double>(x[i]); }; };
  std::string line, first;
  bool ok = true;
  auto judge = [&](const RuleOut& ro, auto get, const std::vector<double>& ref) {
    std::string f1;
    const std::size_t bad = rule_offenders(ro, get, ref, inf_mode, f1);
    std::size_t nonfinite_ref = 0;
    for (double e : ref) nonfinite_ref += !std::isfinite(e);
    char buf[96];
    std::snprintf(buf, sizeof buf, " %s %zu/%zu%s", ro.name, nonfinite_ref, ref.size(), bad ? "!" : "");
    line += buf;
    if (bad) {
      if (first.empty()) first = f1 + " (" + std::to_string(bad) + " offend)";
      ok = false;
    }
  };
  judge({"dq", p.T, p.H * KD, bf16_max, true}, bfget(o.dq), r.dq);
  judge({"dk", p.T, p.H * KD, bf16_max, true}, bfget(o.dk), r.dk);
  judge({"dv", p.T, HV * VD, bf16_max, true}, bfget(o.dv), r.dv);
  if (p.gate() == 1) judge({"dg", p.T, HV, f32_max, false}, fget(o.dg), r.dg);
  if (p.gate() == 2) judge({"dg", 0, 1, f32_max, false}, fget(o.dg), head_sums(r.dg, HV));  // no T axis: exactly
  if (p.delta()) judge({"dbeta", p.T, HV, f32_max, false}, fget(o.dbeta), r.dbeta);
  if (p.h0) judge({"dh0", 0, 1, f32_max, false}, fget(o.dh0), r.dh0);
  char hvs[24] = "";
  if (HV != p.H) std::snprintf(hvs, sizeof hvs, " HV%d", HV);
  std::printf("emu bwd rule%s%s B%d T%-4d H%d%s h0=%d dht=%d mu=%+.0f vt=%-2d %4s %s at t %-3d | oracle non-finite:%s | %s%s%s\n",
              member_tag(p.member), dims_tag(), p.B, p.T, p.H, hvs, p.h0 ? 1 : 0, p.dht ? 1 : 0, p.mu, p.vt, std::isnan(value) ? "NaN" : value > 0 ? "+Inf" : "-Inf",
              plant_name(where), t, line.c_str(), ok ? "PASS" : "FAIL: ", first.c_str(), "");
  std::fflush(stdout);
  return ok;
}

// The rule cases: NaN, +Inf, -Inf in every input; g at a sequence's first token (0), mid-chunk (30), a chunk's last
// token (63), the first token of a later chunk (64), the last token (T - 1, a short last chunk); the token tensors and
// beta at tokens 0 and 70; h0 and dht once. B2 T100 H1 HV2 (the contract's nominal shape; batch row 1 and value
// head 1 must stay clean), and kgate's shrunk case B2 T1 for g at token 0.
bool run_rule_cases() {
  bool ok = rule_selftest();
  const Shape p{2, 100, 1, true, true, 2.0, 32, 0, 2};
  unsigned seed = 900;
  for (float val : {NAN, INFINITY, -INFINITY}) {
    ok = run_rule(Shape{2, 1, 1, true, true, 2.0, 64}, seed++, PlantIn::g, 0, val) && ok;
    for (int t : {0, 30, 63, 64, 99}) ok = run_rule(p, seed++, PlantIn::g, t, val) && ok;
    for (PlantIn w : {PlantIn::q, PlantIn::k, PlantIn::v, PlantIn::beta, PlantIn::dout})
      for (int t : {0, 70}) ok = run_rule(p, seed++, w, t, val) && ok;
    for (PlantIn w : {PlantIn::h0, PlantIn::dht}) ok = run_rule(p, seed++, w, 0, val) && ok;
  }
  // K = V = 64 (seeds 960 on): g at a sequence's first token (shrunk B2 T1 and the nominal shape), at a chunk's
  // first token, v and k mid-sequence, h0 and dht.
  const Shape p64{2, 100, 1, true, true, 2.0, 32, 0, 2, 64};
  seed = 960;
  for (float val : {NAN, INFINITY, -INFINITY}) {
    ok = run_rule(Shape{2, 1, 1, true, true, 2.0, 64, 0, 0, 64}, seed++, PlantIn::g, 0, val) && ok;
    for (int t : {0, 64}) ok = run_rule(p64, seed++, PlantIn::g, t, val) && ok;
    for (PlantIn w : {PlantIn::k, PlantIn::v}) ok = run_rule(p64, seed++, w, 70, val) && ok;
  }
  for (PlantIn w : {PlantIn::h0, PlantIn::dht}) ok = run_rule(p64, seed++, w, 0, NAN) && ok;
  return ok;
}

// A sequence's last chunk reads past its tokens: the chunk kernel's rows len..63 must be zeros whatever the next
// tokens hold (chunk_tma_kernel's TMA boxes read them and the threads zero them; the cp.async loads zero-fill
// them). NaN and +Inf planted in q, k, dout (and v, Mamba2) at batch row 1's first token (t = T) and at the last
// token the box of batch row 0's last chunk reaches (t = 127), at B2 T100 (chunk 1 of batch row 0: 36 tokens):
// batch row 0's outputs must stay finite (a zero fill skipped gives 0 x NaN in its dq, dk). Seeds 1100 on.
bool run_tail_rule_cases() {
  bool ok = true;
  unsigned seed = 1100;
  for (float val : {NAN, INFINITY}) {
    const Shape p{2, 100, 1, true, true, 2.0, 32, 0, 2};
    for (PlantIn w : {PlantIn::q, PlantIn::k, PlantIn::dout})
      for (int t : {100, 127}) ok = run_rule(p, seed++, w, t, val) && ok;
    const Shape m{2, 100, 1, true, true, 2.0, 32, 0, 2, 64, 1};  // Mamba2 at K = V = 64: v is V_new
    ok = run_rule(m, seed++, PlantIn::v, 100, val) && ok;
  }
  return ok;
}

// The rule cases for the members without the delta rule (Mamba2, RetNet, linear attention) at the nominal shape
// B2 T100 H1 HV2 (K = V = 128 and 64): NaN, +Inf, -Inf in every input they have (g: Mamba2 at a sequence's first
// token, a chunk's first token and mid-chunk, and the shrunk B2 T1; RetNet's one g of value head 0), seeds 1000 on.
// quick (ctest glr_sm90_emu_bwd_members): NaN in g at token 0 (Mamba2, RetNet) and in v at 70, -Inf in dout at 70
// (K = V = 64).
bool run_member_rule_cases(bool quick) {
  bool ok = rule_selftest();
  unsigned seed = 1000;
  for (int m : {1, 2, 3}) {
    const Shape p{2, 100, 1, true, true, 2.0, 32, 0, 2, 128, m};
    const Shape p64{2, 100, 1, true, true, 2.0, 16, 0, 2, 64, m};
    if (quick) {
      if (m != 3) ok = run_rule(p, seed++, PlantIn::g, 0, NAN) && ok;
      ok = run_rule(p, seed++, PlantIn::v, 70, NAN) && ok;
      ok = run_rule(p64, seed++, PlantIn::dout, 70, -INFINITY) && ok;
      continue;
    }
    for (float val : {NAN, INFINITY, -INFINITY}) {
      if (m == 1) {
        ok = run_rule(Shape{2, 1, 1, true, true, 2.0, 64, 0, 0, 128, m}, seed++, PlantIn::g, 0, val) && ok;
        for (int t : {0, 30, 64, 99}) ok = run_rule(p, seed++, PlantIn::g, t, val) && ok;
        ok = run_rule(p64, seed++, PlantIn::g, 0, val) && ok;
      }
      if (m == 2) {
        ok = run_rule(p, seed++, PlantIn::g, 0, val) && ok;
        ok = run_rule(p64, seed++, PlantIn::g, 0, val) && ok;
      }
      for (PlantIn w : {PlantIn::q, PlantIn::k, PlantIn::v, PlantIn::dout})
        for (int t : {0, 70}) ok = run_rule(p, seed++, w, t, val) && ok;
      for (PlantIn w : {PlantIn::k, PlantIn::v}) ok = run_rule(p64, seed++, w, 70, val) && ok;
      for (PlantIn w : {PlantIn::h0, PlantIn::dht}) ok = run_rule(p, seed++, w, 0, val) && ok;
    }
  }
  return ok;
}

// bf16 g and/or beta (g16, b16; flash-linear-attention passes bf16 beta with fp32 g). The inputs are drawn as in
// run, then g and beta rounded to bf16 where passed in bf16, so the float64 reference and a second, fp32 run
// see the same values. Checks: (1) dq, dk, dv, dh0 bit for bit those of the fp32 run (only the loads of g, beta
// and the stores of dg, dbeta depend on the dtypes); (2) each bf16 dg, dbeta element is the fp32 run's rounded
// once to nearest even, bit for bit, and DeltaNet's dg stays unwritten; (3) every gradient against the float64
// reference within run's bounds, one bf16 rounding (u) added for the bf16 dg and dbeta.
bool run_bf16(const Shape& p, unsigned seed, bool g16, bool b16) {
  if (skip_case(p.D)) return true;
  use_dims(p.D);
  Inputs in = make_inputs(p, seed);
  if (p.plant == 3)
    for (int b = 0; b < p.B; ++b) in.g[(static_cast<std::size_t>(b) * p.T + p.T / 2) * p.H] = -INFINITY;
  auto rn = [](float x) { return __bfloat162float(__float2bfloat16_rn(x)); };
  if (g16)
    for (auto& x : in.g) x = rn(x);
  if (b16)
    for (auto& x : in.beta) x = rn(x);
  const float scale = inputs_kind() == InputKind::check ? 1.0f / std::sqrt(static_cast<float>(KD)) : 0.125f;
  const Outputs o32 = run_kernels(p, in, scale);
  const Outputs o = run_kernels(p, in, scale, g16, b16);
  const Grads r = reference(p, in, scale);
  const double u = std::ldexp(1.0, -9);
  std::string line;
  char buf[160];
  auto bits = [](const auto& x, const auto& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(x[0])) == 0;
  };
  const bool same = bits(o.dq, o32.dq) && bits(o.dk, o32.dk) && bits(o.dv, o32.dv) && bits(o.dh0, o32.dh0);
  line += same ? " | dq dk dv dh0 = fp32 run's" : " | dq dk dv dh0 DIFFER from fp32 run's";
  bool ok = same;
  // (2): the bf16 outputs against the fp32 run's, rounded once (an unwritten element keeps the NaN poison, whose
  // bits match no rounded number, except where the fp32 result is NaN itself: none here, see (3)'s finiteness).
  auto rounded_once = [&](const std::vector<__nv_bfloat16>& x16, const std::vector<float>& x32, std::size_t& bad) {
    bad = 0;
    for (std::size_t i = 0; i < x16.size(); ++i) {
      const __nv_bfloat16 want = __float2bfloat16_rn(x32[i]);
      if (std::memcmp(&x16[i], &want, 2) != 0) ++bad;
    }
    return bad == 0;
  };
  std::size_t bad = 0;
  if (g16 && p.gate() != 0) {
    const bool gi = rounded_once(o.dg16, o32.dg, bad);
    ok = ok && gi;
    std::snprintf(buf, sizeof buf, " dg=rn(fp32 dg)%s", gi ? "" : (" " + std::to_string(bad) + " DIFFER").c_str());
    line += buf;
  }
  if (p.gate() == 0) {
    bool untouched = true;
    for (auto x : o.dg16) untouched = untouched && std::isnan(__bfloat162float(x));
    for (float x : o.dg) untouched = untouched && std::isnan(x);
    ok = ok && untouched;
    line += untouched ? " dg unwritten" : " dg WRITTEN!";
  }
  if (b16) {
    const bool bi = rounded_once(o.dbeta16, o32.dbeta, bad);
    ok = ok && bi;
    std::snprintf(buf, sizeof buf, " dbeta=rn(fp32 dbeta)%s", bi ? "" : (" " + std::to_string(bad) + " DIFFER").c_str());
    line += buf;
  }
  // (3)
  auto bfget = [](const std::vector<__nv_bfloat16>& x) { return [&x](std::size_t i) { return f(x[i]); }; };
  auto fget = [](const std::vector<float>& x) { return [&x](std::size_t i) { return static_cast<double>(x[i]); }; };
  const Err e[6] = {error(bfget(o.dq), r.dq),
                    error(bfget(o.dk), r.dk),
                    error(bfget(o.dv), r.dv),
                    p.gate() == 0 ? Err{}
                    : g16         ? error(bfget(o.dg16), p.gate() == 2 ? head_sums(r.dg, p.hv()) : r.dg)
                                  : error(fget(o.dg), p.gate() == 2 ? head_sums(r.dg, p.hv()) : r.dg),
                    !p.delta() ? Err{} : b16 ? error(bfget(o.dbeta16), r.dbeta) : error(fget(o.dbeta), r.dbeta),
                    p.h0 ? error(fget(o.dh0), r.dh0) : Err{}};
  const char* names[6] = {"dq", "dk", "dv", "dg", "dbeta", "dh0"};
  const double bound[6] = {8 * u, 8 * u, 8 * u, (g16 ? 17 : 16) * u, (b16 ? 9 : 8) * u, 8 * u};
  line += " | rel2";
  for (int i = 0; i < 6; ++i) {
    if ((i == 3 && p.gate() == 0) || (i == 4 && !p.delta()) || (i == 5 && !p.h0)) continue;
    const bool gi = e[i].finite && e[i].rel2 <= bound[i];
    ok = ok && gi;
    std::snprintf(buf, sizeof buf, " %s %.2e%s", names[i], e[i].rel2, gi ? "" : (e[i].finite ? "!" : "!nan"));
    line += buf;
  }
  std::printf("emu bwd bf16%s %s%s%s B%d T%-4d H%d HV%d h0=%d dht=%d mu=%+.0f vt=%-2d%s%s%s | %s\n", member_tag(p.member), g16 ? "g" : "",
              g16 && b16 ? "+beta" : b16 ? "beta" : "", dims_tag(), p.B, p.T, p.H, p.hv(), p.h0 ? 1 : 0, p.dht ? 1 : 0, p.mu, p.vt,
              p.deltanet() ? " deltanet (gate 0)" : "", p.plant == 3 ? " g=-Inf at T/2" : "", line.c_str(),
              ok ? "PASS" : "FAIL");
  std::fflush(stdout);
  return ok;
}

#include "emu_bwd_varlen.inc"  // packed sequences: run_varlen_cases ("varlen")
#include "emu_bwd_saved.inc"   // the forward's saved wy outputs in the backward: run_saved_cases ("saved")

// Packed sequences (unsplit: run_kernels_varlen's own launches, launch_dh): the whole backward with dh_wgmma_kernel's
// prefetching schedule against its plain one, every word of dq, dk, dv, dg, dbeta, dh0 (0 may differ). Inputs as
// run_varlen draws them.
bool run_dh_prefetch_varlen_compare(const VarlenCase& vc, unsigned seed) {
  if (skip_case(vc.D)) return true;
  use_dims(vc.D);
  const int N = static_cast<int>(vc.lens.size()), HV = vc.HV;
  std::vector<std::int64_t> cu(1, 0);
  for (int l : vc.lens) cu.push_back(cu.back() + l);
  const int T = static_cast<int>(cu.back());
  Inputs in = make_inputs(vc.shape(T), seed);
  std::mt19937_64 rng(seed * 7919u + 13u);
  std::normal_distribution<double> nd;
  const std::size_t hs = static_cast<std::size_t>(N) * HV * KD * VD;
  in.h0.assign(vc.h0 ? hs : 0, 0.f);
  for (auto& x : in.h0) x = static_cast<float>(0.1 * nd(rng));
  in.dht.assign(vc.dht ? hs : 0, 0.f);
  for (auto& x : in.dht) x = static_cast<float>(nd(rng));
  const float scale = 1.0f / std::sqrt(static_cast<float>(KD));
  dh_prefetch = 0;
  const VarlenRun plain = run_kernels_varlen(vc, in, cu, scale);
  dh_prefetch = 1;
  const VarlenRun pf = run_kernels_varlen(vc, in, cu, scale);
  dh_prefetch = -1;
  const std::size_t words = word_diff(pf.o.dq, plain.o.dq).words + word_diff(pf.o.dk, plain.o.dk).words +
                            word_diff(pf.o.dv, plain.o.dv).words + word_diff(pf.o.dg, plain.o.dg).words +
                            word_diff(pf.o.dbeta, plain.o.dbeta).words + word_diff(pf.o.dh0, plain.o.dh0).words;
  const std::size_t total = plain.o.dq.size() + plain.o.dk.size() + plain.o.dv.size() + plain.o.dg.size() +
                            plain.o.dbeta.size() + plain.o.dh0.size();
  const bool ok = plain.status == 0 && pf.status == 0 && words == 0;
  g_dhp_words += words;
  ++g_dhp_compares;
  std::string lens;
  for (int l : vc.lens) lens += (lens.empty() ? "" : ",") + std::to_string(l);
  std::printf("emu bwd varlen%s lens {%s} H%d HV%d h0=%d dht=%d mu=%+.0f vt=%-2d | prefetching vs plain "
              "dh_wgmma_kernel, the whole backward: status %d / %d, words differing %zu of %zu | %s\n",
              dims_tag(), lens.c_str(), vc.H, HV, vc.h0 ? 1 : 0, vc.dht ? 1 : 0, vc.mu, vc.vt, plain.status, pf.status,
              words, total, ok ? "PASS" : "FAIL");
  std::fflush(stdout);
  return ok;
}

}  // namespace

// With arguments B T H h0 dht mu [vt [HV]]: that one case only (vt 64 unless given, HV = H unless given).
// "gva": the grouped-value-head cases only.
int main(int argc, char** argv) {
  if (std::getenv("GLR_EMU_K64") != nullptr) k64_only = true;  // any subset, its K = 64 cases only
  if (argc >= 7 && argc <= 9) {
    Shape s{std::atoi(argv[1]),       std::atoi(argv[2]), std::atoi(argv[3]),
            std::atoi(argv[4]) != 0,  std::atoi(argv[5]) != 0, std::atof(argv[6]),
            argc >= 8 ? std::atoi(argv[7]) : 64};
    s.HV = argc == 9 ? std::atoi(argv[8]) : 0;
    if (const char* m = std::getenv("GLR_EMU_MEMBER")) s.member = std::atoi(m);  // 1 mamba2, 2 retnet, 3 linear attention
    if (std::getenv("GLR_EMU_K64") != nullptr) s.D = 64;
    if (const char* sg = std::getenv("GLR_EMU_SEGS")) s.segs = std::atoi(sg);  // the split passes in that many segments
    if (s.segs < 1) return 2;
    if (s.vt != 16 && s.vt != 32 && s.vt != 64) return 2;
    if (s.hv() < s.H || s.hv() % s.H != 0) return 2;
    const char* sd = std::getenv("GLR_EMU_SEED");  // the single case's seed (99 unless given)
    return run(s, sd ? static_cast<unsigned>(std::atoi(sd)) : 99u, false) ? 0 : 1;
  }
  const Shape shapes[] = {{1, 1, 1, false, false, 2.0, 64},   {1, 33, 1, true, true, 2.0, 16},
                          {1, 64, 1, false, true, -1.0, 32},  {1, 100, 2, true, false, 2.0, 64},
                          {2, 130, 1, false, false, 0.0, 16}, {1, 200, 1, true, true, 8.0, 64},
                          {1, 200, 1, true, true, 8.0, 16},   {1, 200, 1, false, true, -1.0, 32},
                          {1, 130, 1, true, true, INFINITY, 64},
                          // K = V = 64 (the kernels' kD = 64): T not a multiple of 64, h0 / dht, two heads, two
                          // sequences, every slice width (1, 2, 4 slices a head), DeltaNet
                          {1, 100, 1, true, true, 2.0, 64, 0, 0, 64},  {2, 130, 1, false, true, -1.0, 16, 0, 0, 64},
                          {1, 33, 2, true, false, 4.0, 32, 0, 0, 64},  {1, 200, 1, true, true, 8.0, 16, 0, 0, 64},
                          {1, 70, 1, true, true, INFINITY, 32, 0, 0, 64}};
  // Grouped value heads (HV = 2H and 4H): value head hv reads q/k head hv / (HV / H); dq and dk the group kernel's
  // fixed-order sums of the value heads' fp32 shares. Fresh inputs (seeds 301 on), with and without h0/dht, every
  // slice width, DeltaNet; two of them run twice (bitwise equal).
  const Shape gva[] = {{1, 100, 1, true, true, 2.0, 64, 0, 2},   {1, 130, 2, false, false, 0.0, 16, 0, 8},
                       {2, 70, 1, true, false, -1.0, 32, 0, 4},  {1, 64, 2, false, true, INFINITY, 64, 0, 4},
                       {2, 33, 2, true, true, 4.0, 32, 0, 4},
                       // K = V = 64
                       {1, 100, 1, true, true, 2.0, 64, 0, 2, 64}, {2, 70, 1, true, false, -1.0, 16, 0, 4, 64},
                       {1, 130, 2, false, true, INFINITY, 32, 0, 4, 64}};
  // The members without the delta rule (the kernels' kDelta = false): Mamba2 (1), RetNet (2), linear attention (3),
  // K = V = 128 and 64, h0 / dht, two sequences, GVA, every slice width; seeds 401 on. "members" runs these, the
  // planted cases of members_planted and the members' rule cases (run_member_rule_cases); "members-quick" (ctest
  // glr_sm90_emu_bwd_members) a few of each.
  const Shape members[] = {
      {1, 100, 1, true, true, 2.0, 64, 0, 0, 128, 1},   {2, 130, 1, false, true, -1.0, 16, 0, 0, 128, 1},
      {1, 100, 1, true, true, 8.0, 32, 0, 0, 64, 1},    {1, 100, 2, true, true, 4.0, 32, 0, 0, 128, 2},
      {2, 70, 1, true, false, 2.0, 64, 0, 0, 64, 2},    {1, 130, 1, true, true, 0.0, 64, 0, 0, 128, 3},
      {1, 100, 1, true, true, 0.0, 16, 0, 0, 64, 3},
      // GVA
      {1, 100, 1, true, true, 2.0, 64, 0, 2, 128, 1},   {2, 33, 2, true, true, 4.0, 32, 0, 4, 128, 2},
      {1, 64, 2, false, true, 0.0, 32, 0, 4, 64, 3},
  };
  // Planted: NaN / +-Inf in v at each sequence's last token (plant 1, 2), g = -Inf at T / 2 (plant 3; Mamba2 only:
  // RetNet's one g is not per token, linear attention has none).
  const Shape members_planted[] = {
      {2, 1, 1, true, true, 2.0, 64, 1, 0, 128, 1}, {1, 130, 1, true, true, 2.0, 64, 1, 0, 128, 1},
      {1, 100, 1, false, true, 4.0, 16, 2, 0, 128, 2}, {1, 130, 1, true, true, 0.0, 32, 1, 0, 64, 3},
      {1, 100, 1, true, true, 2.0, 32, 3, 0, 128, 1}, {1, 100, 1, true, true, 2.0, 32, 3, 0, 64, 1},
  };
  bool ok = true;
  if (argc == 2 && (std::string(argv[1]) == "members" || std::string(argv[1]) == "members-quick")) {
    const bool quick = std::string(argv[1]) == "members-quick";
    unsigned mseed = 401;
    for (const Shape& s : members) {
      const bool pick = !quick || s.HV != 0;  // quick: the GVA cases (one per member, K = V = 128 and 64)
      if (pick) ok = run(s, mseed, s.T == 130) && ok;
      ++mseed;
    }
    unsigned pseed = 450;
    for (const Shape& s : members_planted) {
      if (!quick || s.T == 1 || (s.plant == 3 && s.D == 128)) ok = run(s, pseed, false) && ok;
      ++pseed;
    }
    // bf16 g (Mamba2 per token, RetNet per value head): the bf16 dg bit for bit the fp32 run's rounded once
    if (!quick) ok = run_bf16(Shape{1, 100, 2, true, true, 2.0, 64, 0, 0, 128, 1}, 480, true, false) && ok;
    ok = run_bf16(Shape{2, 70, 1, true, false, 4.0, 32, 0, 2, 64, 2}, 481, true, false) && ok;
    ok = run_member_rule_cases(quick) && ok;
    ok = run_member_varlen_cases(quick) && ok;
    std::printf("%s\n", ok ? "ALL PASS" : "SOME FAILED");
    return ok ? 0 : 1;
  }
  if (argc == 2 && std::string(argv[1]) == "members-varlen") {  // the members' packed cases alone
    ok = run_member_varlen_cases(false);
    std::printf("%s\n", ok ? "ALL PASS" : "SOME FAILED");
    return ok ? 0 : 1;
  }
  if (argc == 2 && std::string(argv[1]) == "k64") {  // every family's K = 64 cases: the default run's, rule, varlen
    k64_only = true;
    argc = 1;
    ok = run_rule_cases() && ok;
    ok = run_varlen_cases() && ok;
  }
  if (argc == 2 && std::string(argv[1]) == "saved") {  // the forward's saved wy outputs (emu_bwd_saved.inc)
    ok = run_saved_cases();
    std::printf("%s\n", ok ? "ALL PASS" : "SOME FAILED");
    return ok ? 0 : 1;
  }
  if (argc == 2 && std::string(argv[1]) == "varlen") {  // packed sequences (emu_bwd_varlen.inc)
    ok = run_varlen_cases();
    std::printf("%s\n", ok ? "ALL PASS" : "SOME FAILED");
    return ok ? 0 : 1;
  }
  if (argc == 2 && std::string(argv[1]) == "dh2") {
    // dh2_kernel (GLR_DH_2GEMM=1, set here for the whole run; gdn_bwd_dh2.cuh): delta-rule cases at 64-column state
    // slices against the float64 recurrence and against today's dh pass (dh2_mode 0; words, normwise difference,
    // the same non-finite words): a short last chunk, DeltaNet, GVA at fast decay, NaN / +-Inf planted in v, g = -Inf,
    // T = 1, slow decay over 4 chunks, K = V = 64, whole chunks with two heads (ctest glr_sm90_emu_bwd_dh2). The
    // rest by hand: GLR_DH_2GEMM=1 tests/glr_sm90/run_emu_bwd.sh [subset] (sweep: the contract inputs x 1e-3).
    setenv("GLR_DH_2GEMM", "1", 1);
    dh2_mode = 1;
    const Shape cases[] = {{1, 100, 1, true, true, 2.0, 64},
                           {2, 130, 1, false, true, INFINITY, 64},
                           {1, 200, 1, true, true, -1.0, 64, 0, 2},
                           {1, 130, 1, true, true, 2.0, 64, 1},
                           {1, 100, 1, false, true, 4.0, 64, 2},
                           {1, 150, 1, true, true, 2.0, 64, 3},
                           {2, 1, 1, true, true, 2.0, 64},
                           {1, 256, 1, true, true, 8.0, 64},
                           {1, 100, 1, true, true, 2.0, 64, 0, 0, 64},
                           {2, 64, 2, true, true, 0.0, 64}};
    unsigned dseed = 2100;
    for (const Shape& c : cases) ok = run(c, dseed++, false) && ok;
    std::printf("%s\n", ok ? "ALL PASS" : "SOME FAILED");
    return ok ? 0 : 1;
  }
  if (argc == 2 && (std::string(argv[1]) == "fused" || std::string(argv[1]) == "fused-all")) {
    // The fused reverse sweep (GLR_FUSED_BWD=1, set here for the whole run: the split and packed runs are gdn_bwd_mma's
    // own launches, which read it; gdn_bwd_fused.cuh): each dense unsplit case against the float64 recurrence and
    // word for word against today's path (fused_mode 0); the split case (gdn_bwd_mma's own launches: the split h
    // pass, pass A' and the reverse combine, then the sweep over every segment, launch_fused_bwd) against float64 and
    // its unsplit run, the fused sweep (word for word against today's split path: the same subset without
    // GLR_FUSED_BWD, GLR_EMU_DUMP and tests/glr_sm90/count_words.py; bench/glr/sm90_bwd_notes.md); packed
    // sequences: each sequence bit for bit alone, float64, invalid offsets. "fused" (ctest glr_sm90_emu_bwd_fused)
    // the cases marked quick; "fused-all" every one.
    setenv("GLR_FUSED_BWD", "1", 1);
    const bool all = std::string(argv[1]) == "fused-all";
    fused_mode = 1;
    struct FCase {
      Shape s;
      bool quick;
    };
    const FCase fcases[] = {
        {{1, 100, 1, true, true, 2.0, 64}, true},                   // a short last chunk, h0, dht
        {{2, 130, 1, false, true, INFINITY, 16}, true},             // DeltaNet (gate 0), two sequences, h pass at 16
        {{1, 200, 1, true, true, -1.0, 32, 0, 2}, true},            // GVA (HV 2), fast decay, h pass at 32
        {{1, 130, 1, true, true, 2.0, 64, 1}, true},                // NaN planted in v
        {{1, 100, 1, false, true, 4.0, 64, 2}, false},              // +-Inf planted in v
        {{1, 150, 1, true, true, 2.0, 64, 3}, true},                // g = -Inf at T / 2
        {{2, 1, 1, true, true, 2.0, 64}, false},                    // T = 1
        {{1, 300, 1, true, true, 2.0, 64, 0, 0, 128, 0, 3}, true},  // split (3 segments): the sweep per segment; unsplit: fused
        {{2, 64, 2, true, true, 0.0, 64}, false},                   // whole chunks, two heads
    };
    unsigned fseed = 1900;
    for (const FCase& c : fcases) {
      if (all || c.quick) ok = run(c.s, fseed, false) && ok;
      ++fseed;
    }
    ok = check_refusal_rule() && ok;
    // the fused path writes none of the chunk kernels' inputs (run_fused_untouched): split in 3 at 64 columns, split
    // GVA at 32 and 16 (pass A' in its Es-only mode at each width), unsplit
    ok = run_fused_untouched({1, 300, 1, true, true, 2.0, 64, 0, 0, 128, 0, 3}, 1950) && ok;
    ok = run_fused_untouched({1, 300, 1, true, false, 2.0, 32, 0, 2, 128, 0, 3}, 1951) && ok;
    if (all) ok = run_fused_untouched({1, 260, 1, false, true, -1.0, 16, 0, 2, 128, 0, 4}, 1952) && ok;
    ok = run_fused_untouched({1, 100, 1, true, true, 2.0, 64}, 1953) && ok;
    // packed sequences: an empty one, a short last chunk, h0 / dht; HV 2; invalid offsets (every output NaN)
    ok = run_varlen(VarlenCase{{130, 0, 200, 65}, 1, 1, true, true, 2.0, 64}, fseed++) && ok;
    if (all) ok = run_varlen(VarlenCase{{70, 140}, 1, 2, true, true, 2.0, 32}, fseed++) && ok;
    ok = run_varlen(VarlenCase{{40, 70, 90}, 1, 2, true, true, 2.0, 64, false, false, false, 1}, fseed++) && ok;
    std::printf("%s\n", ok ? "ALL PASS" : "SOME FAILED");
    return ok ? 0 : 1;
  }
  if (argc == 2 && (std::string(argv[1]) == "wgmma" || std::string(argv[1]) == "wgmma-all")) {
    // The chunk and dh kernels on wgmma (gdn_bwd_wgmma.cuh, gdn_bwd_dh_wgmma.cuh; GLR_DH_WGMMA=1 in the launcher,
    // the chunk kernel's by default), each case also run with chunk_kernel and dh_kernel and compared. "wgmma-all": the delta rule at
    // K = V = 128 and 64 (a short last chunk, two sequences, h0 / dht, DeltaNet), GVA, Mamba2, RetNet, linear
    // attention, NaN planted in v, state slices of 64, 32 and 16 columns; "wgmma" (ctest glr_sm90_emu_bwd_wgmma)
    // the first, second (16-column slices), fourth, sixth and seventh. Packed sequences and every other family by hand:
    // GLR_DH_WGMMA=1 (GLR_BWD_WGMMA=0 for chunk_kernel) tests/glr_sm90/run_emu_bwd.sh [varlen|members|gva|rule|...].
    const bool all = std::string(argv[1]) == "wgmma-all";
    on_wgmma = 1;
    const Shape cases[] = {{1, 100, 1, true, true, 2.0, 64},
                           {2, 130, 1, false, true, INFINITY, 16},
                           {1, 100, 1, true, true, 2.0, 32, 0, 0, 64},
                           {2, 70, 1, true, false, -1.0, 32, 0, 4, 64},
                           {1, 130, 1, true, true, 2.0, 64, 1},
                           {1, 100, 1, true, true, 2.0, 64, 0, 2, 128, 1},
                           {2, 70, 1, true, false, 2.0, 64, 0, 0, 64, 2},
                           {1, 130, 1, true, true, 0.0, 64, 0, 0, 128, 3}};
    unsigned wseed = 700;
    for (int i = 0; i < 8; ++i, ++wseed)
      if (all || i == 0 || i == 1 || i == 3 || i == 5 || i == 6) ok = run(cases[i], wseed, false) && ok;
    std::printf("%s\n", ok ? "ALL PASS" : "SOME FAILED");
    return ok ? 0 : 1;
  }
  if (argc == 2 && (std::string(argv[1]) == "h-prefetch" || std::string(argv[1]) == "h-prefetch-all")) {
    // h_kernel's prefetching schedule (GLR_H_PREFETCH=1, set here for the whole run, so gdn_bwd_mma's own launches,
    // the split and packed runs', take it too; ctest glr_sm90_emu_bwd_h_prefetch runs "h-prefetch"): each case's h
    // pass against the plain schedule word for word (run_h_prefetch_compare: 0 words), then the whole backward with it
    // against the float64 recurrence (run; split cases also against their unsplit run). The delta rule (Gated
    // DeltaNet, DeltaNet) at K = V = 128 and 64, state slices of 64 and 32 columns, GVA, two sequences, T not a
    // multiple of 64 (a 6-token last chunk), T = 1, h0 / dht, the split passes, NaN / +-Inf in v, g = -Inf; packed
    // sequences (each bit for bit alone, invalid offsets). "h-prefetch-all": every case both ways. Seeds 1700 on.
    setenv("GLR_H_PREFETCH", "1", 1);
    const bool all = std::string(argv[1]) == "h-prefetch-all";
    struct HCase {
      Shape s;
      int quick;  // "h-prefetch": 2 both checks, 1 the comparison only
    };
    const HCase hcases[] = {
        {{1, 100, 1, true, true, 2.0, 64}, 2},                    // K = V = 128, 64 columns
        {{2, 70, 1, true, false, -1.0, 64, 0, 4, 64}, 2},         // K = V = 64, GVA x4, two sequences, 6-token tail
        {{1, 70, 1, true, true, INFINITY, 32}, 1},                // DeltaNet, 32 columns
        {{2, 130, 1, false, true, 4.0, 32, 0, 2}, 1},             // 32 columns, GVA (16: the plain schedule)
        {{1, 200, 1, true, true, 8.0, 64, 0, 0, 64, 0, 3}, 2},    // split: 4 chunks in 2, 2, 0
        {{2, 300, 1, true, true, 6.0, 64, 0, 2, 128, 0, 4}, 1},   // split, GVA, two sequences
        {{1, 130, 1, true, true, 2.0, 64, 1, 0, 64}, 1},          // NaN in v at T - 1
        {{1, 100, 1, false, true, 4.0, 64, 2}, 1},                // +-Inf in v
        {{1, 100, 1, true, true, 2.0, 64, 3}, 1},                 // g = -Inf at T / 2
        {{2, 1, 1, true, true, 2.0, 64, 1, 0, 64}, 1},            // T = 1, NaN
    };
    unsigned hseed = 1700;
    for (const HCase& c : hcases) {
      ok = run_h_prefetch_compare(c.s, hseed) && ok;
      if (all || c.quick == 2) {
        h_prefetch = 1;
        ok = run(c.s, hseed, false) && ok;
        h_prefetch = -1;
      }
      ++hseed;
    }
    {  // packed sequences (gdn_bwd_mma's own launches, GLR_H_PREFETCH=1): each sequence bit for bit alone; invalid offsets
      VarlenCase vc{{130, 0, 200, 65}, 1, 1, true, true, 2.0, 64};
      ok = run_varlen(vc, hseed++) && ok;
      if (all) {
        vc.D = 64;
        vc.segs = 3;
        ok = run_varlen(vc, hseed++) && ok;
      }
    }
    std::printf("prefetching vs plain h_kernel: %zu comparisons, differing words %zu\n", g_hp_compares, g_hp_words);
    ok = ok && g_hp_words == 0;
    std::printf("%s\n", ok ? "ALL PASS" : "SOME FAILED");
    return ok ? 0 : 1;
  }
  if (argc == 2 && (std::string(argv[1]) == "dh-prefetch" || std::string(argv[1]) == "dh-prefetch-all")) {
    // dh_wgmma_kernel's prefetching schedule (GLR_DH_PREFETCH=1, set here for the whole run, so gdn_bwd_mma's own
    // launches, the split and packed runs', take it too; ctest glr_sm90_emu_bwd_dh_prefetch runs "dh-prefetch"): each
    // case's state passes against the plain schedule word for word (run_dh_prefetch_compare: the whole workspace, dv,
    // dh0; 0 words), then the whole backward with it against the float64 recurrence (run; split cases also against
    // their unsplit run). 64-column slices with the delta rule (the cases it takes): K = V = 128 and 64, GVA, two
    // sequences, short last chunks (8 and 6 tokens), T = 1, h0 / dht, DeltaNet, the split passes (pass A' and C on
    // kSplit), the h pass split alone, NaN / +-Inf in v, NaN / +-Inf in dO, g = -Inf; two cases it does not take
    // (Mamba2, 32 columns: the plain kernel either way); packed sequences (the whole backward both ways word for word,
    // then each sequence bit for bit alone and invalid offsets with it on). "dh-prefetch-all": every case both
    // checks. Seeds 1800 on.
    setenv("GLR_DH_PREFETCH", "1", 1);
    const bool all = std::string(argv[1]) == "dh-prefetch-all";
    struct DhCase {
      Shape s;
      int quick;  // "dh-prefetch": 2 both checks, 1 the comparison only
    };
    const DhCase dcases[] = {
        {{1, 200, 1, true, true, 2.0, 64}, 2},                          // K = V = 128, 4 chunks, an 8-token last one
        {{2, 70, 1, true, false, -1.0, 64, 0, 4, 64}, 2},               // K = V = 64, GVA x4, 2 sequences, 6-token tail
        {{1, 130, 1, true, true, INFINITY, 64}, 1},                     // DeltaNet
        {{2, 130, 1, false, true, 4.0, 64, 0, 2}, 1},                   // GVA, dht only
        {{1, 200, 1, true, true, 8.0, 64, 0, 0, 64, 0, 3}, 2},          // split: 4 chunks in 2, 1, 1
        {{2, 300, 1, true, true, 6.0, 64, 0, 2, 128, 0, 4}, 1},         // split, GVA, two sequences
        {{1, 300, 1, true, true, 6.0, 64, 0, 0, 128, 0, 3, 1, false}, 1},  // the h pass split, the dh pass not
        {{1, 130, 1, true, true, 2.0, 64, 1, 0, 64}, 1},                // NaN in v at T - 1
        {{1, 100, 1, false, true, 4.0, 64, 2}, 1},                      // +-Inf in v
        {{1, 130, 1, true, true, 2.0, 64, 4}, 1},                       // NaN, +-Inf in dO (the comparison only)
        {{1, 100, 1, true, true, 2.0, 64, 3}, 1},                       // g = -Inf at T / 2
        {{2, 1, 1, true, true, 2.0, 64, 1, 0, 64}, 1},                  // T = 1, NaN
        {{1, 100, 1, true, true, 2.0, 64, 0, 0, 128, 1}, 1},            // Mamba2 (no delta rule: plain either way)
        {{1, 100, 1, true, true, 2.0, 32}, 1},                          // 32 columns (plain either way)
    };
    unsigned dseed = 1800;
    for (const DhCase& c : dcases) {
      ok = run_dh_prefetch_compare(c.s, dseed) && ok;
      if ((all && c.s.plant != 4) || c.quick == 2) {
        dh_prefetch = 1;
        ok = run(c.s, dseed, false) && ok;
        dh_prefetch = -1;
      }
      ++dseed;
    }
    {  // packed sequences: both ways word for word; with it on each sequence bit for bit alone; invalid offsets
      VarlenCase vc{{130, 0, 200, 65}, 1, 1, true, true, 2.0, 64};
      ok = run_dh_prefetch_varlen_compare(vc, dseed) && ok;
      ok = run_varlen(vc, dseed++) && ok;
      VarlenCase gva{{70, 129}, 1, 2, false, true, -1.0, 64};
      gva.D = 64;
      ok = run_dh_prefetch_varlen_compare(gva, dseed++) && ok;
      VarlenCase bad = vc;
      bad.bad = 1;
      ok = run_varlen(bad, dseed++) && ok;
      if (all) {
        vc.D = 64;
        vc.segs = 3;
        ok = run_varlen(vc, dseed++) && ok;
      }
    }
    std::printf("prefetching vs plain dh_wgmma_kernel: %zu comparisons, differing words %zu\n", g_dhp_compares,
                g_dhp_words);
    ok = ok && g_dhp_words == 0;
    std::printf("%s\n", ok ? "ALL PASS" : "SOME FAILED");
    return ok ? 0 : 1;
  }
  if (argc == 2 && (std::string(argv[1]) == "h-wgmma" || std::string(argv[1]) == "h-wgmma-all")) {
    // The backward's h pass on wgmma (GLR_H_WGMMA=1, set here for the whole run: gdn_bwd_mma's own launches, the
    // split cases', read it too): each case's h pass against h_kernel word for word (run_h_compare), then the whole
    // backward with it against the float64 recurrence (run; split cases also against their unsplit run, both on
    // wgmma). State slices of 64 columns (the wgmma h pass's only width). "h-wgmma-all": the delta rule, DeltaNet,
    // Mamba2, RetNet, linear attention at K = V = 128 and 64, GVA, two sequences, h0 / dht, the split passes
    // (segments of 1 or 2 chunks, empty ones), NaN / +-Inf in v and g = -Inf, kgate's nan/inf rule at 64 columns
    // (NaN, +Inf, -Inf in v, k, g, beta), packed sequences (each sequence bit for bit alone, invalid offsets);
    // "h-wgmma" (ctest glr_sm90_emu_bwd_h_wgmma) the cases marked quick. Seeds 1500 on.
    setenv("GLR_H_WGMMA", "1", 1);
    const bool all = std::string(argv[1]) == "h-wgmma-all";
    struct HCase {
      Shape s;
      int quick;  // "h-wgmma": 2 both checks, 1 the h pass comparison only, 0 neither
    };
    const HCase hcases[] = {
        {{1, 100, 1, true, true, 2.0, 64}, 2},                          // the delta rule, K = V = 128
        {{2, 70, 1, true, false, -1.0, 64, 0, 4, 64}, 1},               // K = V = 64, GVA, two sequences
        {{1, 70, 1, true, true, INFINITY, 64, 0, 0, 64}, 1},            // DeltaNet
        {{1, 100, 1, true, true, 2.0, 64, 0, 2, 64, 1}, 1},             // Mamba2, GVA
        {{2, 70, 1, true, false, 2.0, 64, 0, 0, 64, 2}, 1},             // RetNet
        {{1, 64, 2, false, true, 0.0, 64, 0, 4, 64, 3}, 1},             // linear attention, GVA
        {{1, 200, 1, true, true, 8.0, 64, 0, 0, 64, 0, 3}, 2},          // split: 4 chunks in 2, 2, 0
        {{1, 130, 1, true, true, 2.0, 64, 1, 0, 64}, 1},                // NaN in v at T - 1
        {{2, 130, 1, false, true, INFINITY, 64}, 0},                    // DeltaNet, K = V = 128
        {{1, 100, 1, true, true, 2.0, 64, 0, 2, 128, 1}, 0},            // Mamba2, GVA
        {{1, 100, 2, true, true, 4.0, 64, 0, 0, 128, 2}, 0},            // RetNet
        {{1, 130, 1, true, true, 0.0, 64, 0, 0, 128, 3}, 0},            // linear attention
        {{1, 200, 1, true, true, 8.0, 64, 0, 0, 128, 0, 3}, 0},         // split, slow decay
        {{2, 300, 1, true, true, 6.0, 64, 0, 2, 128, 0, 4}, 0},         // split, GVA, two sequences
        {{1, 200, 1, false, true, 8.0, 64, 0, 0, 64, 1, 3}, 0},         // split Mamba2
        {{1, 330, 1, true, false, 4.0, 64, 0, 2, 64, 2, 5}, 0},         // split RetNet, GVA
        {{1, 130, 1, true, true, 2.0, 64, 1}, 0},                       // NaN in v, K = V = 128
        {{1, 100, 1, false, true, 4.0, 64, 2}, 0},                      // +-Inf in v
        {{1, 100, 1, true, true, 2.0, 64, 3}, 0},                       // g = -Inf at T / 2
        {{2, 1, 1, true, true, 2.0, 64, 1, 0, 64}, 0},                  // T = 1, NaN
    };
    unsigned hseed = 1500;
    for (const HCase& c : hcases) {
      if (all || c.quick >= 1) ok = run_h_compare(c.s, hseed) && ok;
      if (all || c.quick == 2) ok = run(c.s, hseed, false) && ok;
      ++hseed;
    }
    // kgate's rule at 64 columns (B2 T100 H1 HV2, the contract's nominal shape; run_rule_cases runs it at 32)
    const Shape r128{2, 100, 1, true, true, 2.0, 64, 0, 2};
    if (all) {
      for (float val : {NAN, INFINITY, -INFINITY}) {
        for (PlantIn w : {PlantIn::v, PlantIn::k, PlantIn::beta}) ok = run_rule(r128, hseed++, w, 70, val) && ok;
        for (int t : {0, 64}) ok = run_rule(r128, hseed++, PlantIn::g, t, val) && ok;
        ok = run_rule(Shape{2, 100, 1, true, true, 2.0, 64, 0, 2, 64, 1}, hseed++, PlantIn::v, 70, val) && ok;  // Mamba2
      }
      // packed sequences at 64 columns: each sequence bit for bit alone (both on wgmma), float64; invalid offsets
      VarlenCase vc{{130, 0, 200, 65}, 1, 1, true, true, 2.0, 64};
      ok = run_varlen(vc, hseed++) && ok;
      vc.D = 64;
      vc.segs = 3;
      ok = run_varlen(vc, hseed++) && ok;
      ok = run_varlen(VarlenCase{{40, 70, 90}, 1, 2, true, true, 2.0, 64, false, false, false, 1, 64}, hseed++) && ok;
    }
    std::printf("%s\n", ok ? "ALL PASS" : "SOME FAILED");
    return ok ? 0 : 1;
  }
  if (argc == 2 && (std::string(argv[1]) == "split" || std::string(argv[1]) == "split-all")) {
    // The split state passes (GdnBwdArgs::segs forced; launch_state_passes): each case against the float64
    // recurrence and against the same case unsplit (rounding-level differences). Segments of 1 or 2 chunks (the
    // rule's 16-chunk minimum is the dispatch's: any segs >= 1 runs), empty last segments, T not a multiple of 64,
    // combine chains of 1 to 3 steps; Gated DeltaNet (two sequences, GVA), DeltaNet, Mamba2 (kDelta = false: scalar
    // maps), RetNet with GVA, K = V = 128 and 64, h0 / dht present and absent, slice widths 64, 32, 16; packed
    // sequences (split, and each sequence alone split the same: bitwise equal). "split" (ctest
    // glr_sm90_emu_bwd_split) runs the K = V = 64 ones and the first K = V = 128 one; "split-all" every case.
    // Seeds 1300 on.
    const bool all = std::string(argv[1]) == "split-all";
    const Shape split_cases[] = {
        {1, 200, 1, true, true, 8.0, 64, 0, 0, 128, 0, 3},       // 4 chunks: 2, 2, 0, the last short; slow decay
        {2, 300, 1, true, true, 6.0, 64, 0, 2, 128, 0, 4},       // 5 chunks: 2, 2, 1, 0; GVA, two sequences
        {1, 230, 1, true, true, INFINITY, 32, 0, 0, 128, 0, 4},  // DeltaNet, 4 chunks of 1
        {1, 200, 1, false, true, 8.0, 16, 0, 0, 128, 1, 3},      // Mamba2, slow decay, no h0
        {2, 300, 1, true, true, 6.0, 32, 0, 0, 64, 0, 4},        // K = V = 64: the delta rule, two sequences
        {1, 230, 1, true, true, INFINITY, 16, 0, 0, 64, 0, 4},   // DeltaNet
        {1, 200, 1, false, true, 8.0, 64, 0, 0, 64, 1, 3},       // Mamba2
        {1, 330, 1, true, false, 4.0, 16, 0, 2, 64, 2, 5},       // RetNet GVA, 6 chunks: 2, 2, 2, 0, 0
    };
    unsigned sseed = 1300;
    for (const Shape& c : split_cases) {
      if (all || c.D == 64 || &c == split_cases) ok = run(c, sseed, false) && ok;
      ++sseed;
    }
    for (int D : {64, 128}) {
      if (!all && D == 128) continue;
      VarlenCase vc{{130, 0, 200, 65}, 1, 1, true, true, 2.0, 32};
      vc.D = D;
      vc.segs = 3;
      ok = run_varlen(vc, sseed++) && ok;
    }
    {  // invalid packed offsets, split: status 1 and every output NaN (the split passes do nothing)
      VarlenCase vc{{40, 70, 90}, 1, 2, true, true, 2.0, 16, false, false, false, 1, 64};
      vc.segs = 3;
      ok = run_varlen(vc, sseed++) && ok;
      vc.segs = 64;  // and split by length
      vc.seg_len = 1;
      ok = run_varlen(vc, sseed++) && ok;
    }
    // Segments by length (segments.cuh): packed sequences of mixed lengths in 1, 2 and many segments, each also alone
    // (a dense B1 run cut by the same rule: bitwise equal), float64; seg_len 2: 65 (2 chunks), 63, 64, 1 whole, 200 (4)
    // in 2, 450 (8) in 4; seg_len 1: 65 in 2. GVA at K = V = 64; then the h pass split alone (dh_split false: the dh
    // pass unsplit, as the rule picks for the packed 32k shape), Mamba2 (scalar maps), K = V = 128 (split-all).
    for (int D : {64, 128}) {
      if (!all && D == 128) continue;
      VarlenCase vc{{65, 1, 450, 63, 64, 200}, 1, 2, true, true, 4.0, 32};
      vc.D = D;
      vc.segs = 64;
      vc.seg_len = 2;
      ok = run_varlen(vc, sseed++) && ok;
      vc.dh_split = false;
      ok = run_varlen(vc, sseed++) && ok;
      vc = VarlenCase{{65, 330, 1}, 1, 1, true, true, 6.0, 64};
      vc.D = D;
      vc.member = 1;
      vc.segs = 64;
      vc.seg_len = 1;
      ok = run_varlen(vc, sseed++) && ok;
    }
    {  // dense, by length: 11 chunks, seg_len 3 -> 3 segments (4, 3, 4 chunks), run twice (bitwise the same); the h
       // pass alone split too; planted NaN in v at the last token (plant 1) and g = -Inf at T / 2 (plant 3), split
      Shape c{1, 700, 1, true, true, 6.0, 64, 0, 2, 64, 0, 64};
      c.seg_len = 3;
      ok = run(c, sseed++, true) && ok;
      c.dh_split = false;
      ok = run(c, sseed++, false) && ok;
      c.dh_split = true;
      for (int plant : {1, 3}) {
        c.plant = plant;
        ok = run(c, sseed++, false) && ok;
      }
    }
    // The dispatch's rule (the forward's, on the backward's shapes; 132 SMs): 8 segments at B1 T32768 H16, 4 at HV32,
    // none at B8 T4096 H16 or B1 T2048 H16.
    auto rule = [](int B, int T, int H, int HV) {
      GdnBwdArgs a;
      a.B = B, a.T = T, a.H = H, a.HV = HV, a.D = 128;
      return glr::cuda::sm90::gdn_bwd_split_segments(a, 132);
    };
    const bool rule_ok = rule(1, 32768, 16, 16) == 8 && rule(1, 32768, 16, 32) == 4 && rule(8, 4096, 16, 16) == 1 &&
                         rule(1, 2048, 16, 16) == 1;
    ok = ok && rule_ok;
    std::printf("split rule: B1 T32768 H16 %d, HV32 %d, B8 T4096 %d, B1 T2048 %d | %s\n", rule(1, 32768, 16, 16),
                rule(1, 32768, 16, 32), rule(8, 4096, 16, 16), rule(1, 2048, 16, 16), rule_ok ? "PASS" : "FAIL");
    // The plan by length (gdn_bwd_split_plan): dense as the count (B1 T32768 H16: 8 segments of 64 chunks, both
    // passes); the packed 32k shape (15 sequences, 32768 tokens, H16): segments of 64 chunks, the dh pass split too
    // on wgmma, the h pass only on dh_kernel.
    auto plan = [](int B, int T, int H, int HV, int N, bool dh_wgmma) {
      GdnBwdArgs a;
      a.B = B, a.T = T, a.H = H, a.HV = HV, a.D = 128, a.N = N;
      glr::cuda::sm90::gdn_bwd_split_plan(a, 132, dh_wgmma);
      return a;
    };
    const GdnBwdArgs p1 = plan(1, 32768, 16, 16, 0, false), p2 = plan(8, 4096, 16, 16, 0, true),
                     p3 = plan(1, 32768, 16, 16, 15, false), p4 = plan(1, 32768, 16, 32, 15, true),
                     p5 = plan(1, 32768, 16, 16, 15, true);
    const bool plan_ok = glr::cuda::sm90::seg::dense_count(p1) == 8 && p1.dh_split && !glr::cuda::sm90::seg::split(p2) &&
                         p3.seg_len == 64 && !p3.dh_split && glr::cuda::sm90::seg::count(p3.segs, p3.seg_len, 192) == 3 &&
                         glr::cuda::sm90::seg::count(p4.segs, p4.seg_len, 192) == 1 && p5.dh_split;
    ok = ok && plan_ok;
    std::printf("split plan: B1 T32768 H16 %d segments (dh %d), B8 T4096 split %d, packed 32k H16 seg_len %d (dh on "
                "dh_kernel %d, on wgmma %d), HV32 seg_len %d | %s\n",
                static_cast<int>(glr::cuda::sm90::seg::dense_count(p1)), p1.dh_split ? 1 : 0,
                glr::cuda::sm90::seg::split(p2) ? 1 : 0, p3.seg_len, p3.dh_split ? 1 : 0, p5.dh_split ? 1 : 0, p4.seg_len,
                plan_ok ? "PASS" : "FAIL");
    std::printf("split vs unsplit, worst over the cases: rel2 %.1e, max |diff|/rms %.1e\n", g_split_worst,
                g_split_worst_elem);
    std::printf("%s\n", ok ? "ALL PASS" : "SOME FAILED");
    return ok ? 0 : 1;
  }
  if (argc == 2 && std::string(argv[1]) == "gva") {
    unsigned gseed = 301;
    long last0[8], tiles = 0;
    int finishers = 0;
    for (int j = 0; j < 8; ++j) last0[j] = gdn_bwd::emu_group_last[j].load();
    for (const Shape& s : gva) ok = run(s, gseed++, s.T == 130 || s.T == 33) && ok;
    for (int j = 0; j < 8; ++j) {
      const long n = gdn_bwd::emu_group_last[j].load() - last0[j];
      tiles += n;
      finishers += n > 0 ? 1 : 0;
    }
    // With the in-kernel sum (the default; the ctests set GLR_BWD_GROUP_KERNEL=0 all the same), a run where no block summed a group
    // checked nothing of it; under a shuffled block order the last arriver must vary, or the order check is vacuous.
    if (!glr::cuda::sm90::bwd_group_kernel() && !glr::cuda::sm90::bwd_chunk_tma()) {
      const bool shuffled = emu::block_order() != nullptr;
      const bool summed = tiles > 0 && (!shuffled || finishers > 1);
      std::printf("gva: %ld tiles summed in the chunk kernel, finished last by %d distinct group members%s | %s\n", tiles,
                  finishers, shuffled ? " (shuffled block order)" : "", summed ? "PASS" : "FAIL");
      ok = ok && summed;
    }
    std::printf("%s\n", ok ? "ALL PASS" : "SOME FAILED");
    return ok ? 0 : 1;
  }
  // "planted": NaN or +-Inf in v at each sequence's last token; T = 1 (kgate's shrunk case), a chunk's last
  // row, a short last chunk; then kgate's rule (run_rule_cases: NaN, +Inf, -Inf in every input, g at a sequence's
  // first token among them). The v cases also in the default run; the rule cases (54 runs at B2 T100 HV2, several
  // minutes) only with "planted" or "rule" (the rule cases alone; ctest glr_sm90_emu_bwd_rule).
  if (argc == 2 && std::string(argv[1]) == "tail-rule") {  // run_tail_rule_cases: the rows past a sequence's end
    ok = run_tail_rule_cases();
    std::printf("%s\n", ok ? "ALL PASS" : "SOME FAILED");
    return ok ? 0 : 1;
  }
  if (argc == 2 && std::string(argv[1]) == "rule") {
    ok = run_rule_cases();
    std::printf("%s\n", ok ? "ALL PASS" : "SOME FAILED");
    return ok ? 0 : 1;
  }
  const bool planted_only = argc == 2 && std::string(argv[1]) == "planted";
  if (argc == 1 || planted_only) {
    unsigned pseed = 500;
    for (const Shape& s : {Shape{2, 1, 1, true, true, 2.0, 64, 1}, Shape{2, 1, 1, true, true, 2.0, 64, 2},
                           Shape{1, 64, 1, true, true, 2.0, 32, 1}, Shape{1, 100, 1, false, true, 4.0, 16, 2},
                           Shape{1, 130, 1, true, true, 2.0, 64, 1}, Shape{2, 1, 1, true, true, 2.0, 64, 3},
                           Shape{1, 100, 1, true, true, 2.0, 32, 3},
                           // K = V = 64
                           Shape{2, 1, 1, true, true, 2.0, 64, 1, 0, 64}, Shape{1, 100, 1, false, true, 4.0, 16, 2, 0, 64},
                           Shape{1, 130, 1, true, true, 2.0, 32, 1, 0, 64}, Shape{1, 100, 1, true, true, 2.0, 32, 3, 0, 64}})
      ok = run(s, pseed++, false) && ok;
    if (planted_only) {
      ok = run_rule_cases() && ok;
      std::printf("%s\n", ok ? "ALL PASS" : "SOME FAILED");
      return ok ? 0 : 1;
    }
  }
  // "sweep": kgate's oracle gate on glr/contracts/sm90/gated_deltanet_bwd.toml at its nominal shape (B2 T100 H1, h0,
  // dht), the contract's inputs at scale 1 and scaled by 1e-3 (q, v, dout, h0, dht; the sweep that failed on the
  // H200 at ecef461: dk 1.02x the bound at the last token), seeds 21, 25, 26 (at 1e-3 dk needed 0.079-0.088 there
  // before the fix, over the contract's 0.0625), every gradient within the contract's per-element bound. Also in
  // the default run.
  const bool sweep_only = argc == 2 && std::string(argv[1]) == "sweep";
  if (argc == 1 || sweep_only) {
    const char* old_kind = std::getenv("GLR_EMU_INPUTS");
    const char* old_scale = std::getenv("GLR_EMU_SCALE");
    const std::string keep_kind = old_kind ? old_kind : "", keep_scale = old_scale ? old_scale : "";
    setenv("GLR_EMU_INPUTS", "contract", 1);
    for (const char* sc : {"1", "1e-3"}) {
      setenv("GLR_EMU_SCALE", sc, 1);
      std::printf("contract inputs x %s:\n", sc);
      for (unsigned sd : {21u, 25u, 26u}) ok = run(Shape{2, 100, 1, true, true, 0.0, 64}, sd, false) && ok;
      ok = run(Shape{2, 100, 1, true, true, 0.0, 32, 0, 0, 64}, 21u, false) && ok;  // K = V = 64
    }
    if (old_kind) setenv("GLR_EMU_INPUTS", keep_kind.c_str(), 1); else unsetenv("GLR_EMU_INPUTS");
    if (old_scale) setenv("GLR_EMU_SCALE", keep_scale.c_str(), 1); else unsetenv("GLR_EMU_SCALE");
    if (sweep_only) {
      std::printf("%s\n", ok ? "ALL PASS" : "SOME FAILED");
      return ok ? 0 : 1;
    }
  }
  // "bf16": bf16 beta (flash-linear-attention's), bf16 g, both (run_bf16), fresh seeds, several shapes (short last
  // chunk, two heads, two sequences, every slice width, DeltaNet, a g = -Inf reset). Also in the default run.
  const bool bf16_only = argc == 2 && std::string(argv[1]) == "bf16";
  if (argc == 1 || bf16_only) {
    struct Bf16Case {
      Shape s;
      bool g16, b16;
    };
    const Bf16Case bf16_cases[] = {
        {{1, 100, 2, true, true, 2.0, 64}, false, true},  {{1, 100, 2, true, true, 2.0, 64}, true, false},
        {{1, 100, 2, true, true, 2.0, 64}, true, true},   {{2, 130, 1, false, true, 0.0, 16}, false, true},
        {{1, 64, 1, true, false, -1.0, 32}, true, true},  {{1, 33, 1, true, true, 4.0, 32}, true, false},
        {{1, 130, 1, true, true, INFINITY, 64}, false, true}, {{1, 100, 1, true, true, 2.0, 16, 3}, true, true},
        // with grouped value heads (HV = 2H, 4H): fla's bf16 beta on the shapes glr's benchmark times with HV32
        {{1, 100, 2, true, true, 2.0, 64, 0, 4}, false, true}, {{2, 70, 1, true, false, -1.0, 32, 0, 4}, true, true},
        // K = V = 64
        {{1, 100, 2, true, true, 2.0, 64, 0, 0, 64}, true, true}, {{1, 130, 1, true, true, INFINITY, 32, 0, 0, 64}, false, true},
        {{1, 100, 1, true, true, 2.0, 16, 0, 4, 64}, true, false}};
    unsigned bseed = 700;
    for (const Bf16Case& c : bf16_cases) ok = run_bf16(c.s, bseed++, c.g16, c.b16) && ok;
    if (bf16_only) {
      std::printf("%s\n", ok ? "ALL PASS" : "SOME FAILED");
      return ok ? 0 : 1;
    }
  }
  unsigned seed = 1;
  for (const Shape& s : shapes) ok = run(s, seed++, s.T == 130, s.T == 130 || (s.T == 200 && s.h0 && s.vt == 64)) && ok;
  if (argc == 2 && std::string(argv[1]) == "shapes") {  // the small shapes alone (what "planted", "sweep", "bf16" skip)
    std::printf("%s\n", ok ? "ALL PASS" : "SOME FAILED");
    return ok ? 0 : 1;
  }
  unsigned gseed = 301;
  for (const Shape& s : gva) ok = run(s, gseed++, s.T == 130 || s.T == 33) && ok;
  std::printf("%s\n", ok ? "ALL PASS" : "SOME FAILED");
  return ok ? 0 : 1;
}
