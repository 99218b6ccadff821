// bench/glr/sm90_bwd_check.cu: check and time the tensor-core Gated DeltaNet backward
// (glr/cuda/sm90/gdn_bwd_mma.cuh) against a float64 sequential recurrence backward on the GPU; time the rung-3
// forward (gdn_fwd_mma.cuh) beside it.
//
// Build and run: bench/glr/sm90_bwd_check.sh. Usage: sm90_bwd_check --check [--quick] | --timing. The kernels as
// the launcher picks them (glr/cuda/README.md): the chunk kernel on wgmma (GLR_BWD_WGMMA=0: chunk_kernel), the
// unsplit dh pass on wgmma (GLR_DH_WGMMA=0: dh_kernel, which split dh passes take either way), the h pass on mma.sync
// (GLR_H_WGMMA=1: on wgmma at 64-column slices, state_t_wgmma_kernel's h mode).
// --check exits non-zero when any gradient's error is over its bound, an output is non-finite or unwritten, two
// runs differ in one bit, or the backward from the forward's saved wy outputs differs in one bit from the one that
// recomputes them (check_saved); --timing never fails on a number (timing_saved: the backward from saved outputs).
//
// Reference (float64, one block per (b, h), 128 threads): the forward walks the tokens keeping the state at every
// 64th step (global memory), then the backward walks the blocks of 64 steps last to first, recomputing the states
// of the block, with the reverse-time step of glr/reference/recurrent.cpp:
//   P = e^{g} S_{t-1}, r = P^T k, u = beta (v - r), S_t = P + k u^T;  dS += scale q dO^T; dq = scale S_t dO;
//   du = dS^T k; dk = dS u - beta P du; dv = beta du; dbeta = du . (v - r); dP = dS - beta k du^T;
//   dg = <P, dP>; dS = e^{g} dP.
//
// Bound (bench/glr/sm90_bwd_notes.md, as tests/glr_sm90/emu_bwd_check.cpp): normwise relative error <= 8 u
// (u = 2^-9, 1.6e-2) for dq, dk, dv, dbeta, dh0 and 16 u (3.1e-2) for dg; the emulator measured 1.5 u to 3 u at
// T <= 200. A wrong index, mask, sign or decay gives errors of order 0.05 to 1.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../../glr/cuda/sm90/gdn_bwd_mma.cuh"
#include "sm90_bwd_reference.cuh"

namespace {

using glr::cuda::sm90::GdnBwdArgs;
using glr::cuda::sm90::GdnFwdArgs;
using glr::sm90_bwd_reference::RefOut;
constexpr int KD = 128, VD = 128, KV = KD * VD;

#include "sm90_check_util.cuh"

__global__ void fill_scalars(float* g, float* beta, std::int64_t n, std::uint64_t seed, double mu) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  g[i] = static_cast<float>(-log1p(exp(-(mu + normal(seed, 11, i)))));
  beta[i] = static_cast<float>(1.0 / (1.0 + exp(-normal(seed, 12, i))));
}
__global__ void fill_state(float* h, std::int64_t n, std::uint64_t seed, std::uint64_t stream, double s) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) h[i] = static_cast<float>(s * normal(seed, stream, i));
}

// ---- problem buffers ---------------------------------------------------------------------------------------
struct Problem {
  int B, T, H;
  bool h0, dht;
  double mu;  // g = logsigmoid(mu + z): mu -1 and 2 forget the state within a chunk, 4 keep a third, 8 nearly all
  int segs = 1;  // the split state passes' segments (GdnBwdArgs::segs; the workspace holds up to this many)
};

template <class T>
T* dalloc(std::size_t n) {
  T* p = nullptr;
  CK(cudaMalloc(&p, std::max<std::size_t>(n, 1) * sizeof(T)));
  return p;
}

struct Buffers {
  GdnBwdArgs a;
  GdnFwdArgs f;
  void* ws = nullptr;
  void* fws = nullptr;
  std::int64_t tok = 0, hs = 0;
  // chunk_inputs_kept: the workspace carves the chunk kernels' inputs (V_new's pieces, dX, dh', its residual, the dbeta
  // partials) and the h and dh passes store them whatever the switches say (chunk_inputs_stored)
  Buffers(const Problem& p, std::uint64_t seed, bool chunk_inputs_kept = false) {
    a.chunk_inputs_kept = chunk_inputs_kept;
    a.B = p.B;
    a.T = p.T;
    a.H = p.H;
    a.segs = p.segs;
    a.scale = 1.0f / std::sqrt(static_cast<float>(KD));
    tok = static_cast<std::int64_t>(p.B) * p.T * p.H;
    hs = static_cast<std::int64_t>(p.B) * p.H * KV;
    auto* q = dalloc<__nv_bfloat16>(tok * KD);
    auto* k = dalloc<__nv_bfloat16>(tok * KD);
    auto* v = dalloc<__nv_bfloat16>(tok * VD);
    auto* dout = dalloc<__nv_bfloat16>(tok * VD);
    auto* g = dalloc<float>(tok);
    auto* beta = dalloc<float>(tok);
    const unsigned rb = static_cast<unsigned>((tok * 32 + 255) / 256);
    if (tok > 0) {
      fill_rows<<<rb, 256>>>(q, tok, KD, seed, 1, true);
      fill_rows<<<rb, 256>>>(k, tok, KD, seed, 2, true);
      fill_rows<<<rb, 256>>>(v, tok, VD, seed, 3, false);
      fill_rows<<<rb, 256>>>(dout, tok, VD, seed, 4, false);
      fill_scalars<<<static_cast<unsigned>((tok + 255) / 256), 256>>>(g, beta, tok, seed, p.mu);
    }
    const unsigned hb = static_cast<unsigned>((hs + 255) / 256);
    if (p.h0) {
      float* h0 = dalloc<float>(hs);
      fill_state<<<hb, 256>>>(h0, hs, seed, 13, 0.1);
      a.h0 = h0;
      a.dh0 = dalloc<float>(hs);
    }
    if (p.dht) {
      float* dht = dalloc<float>(hs);
      fill_state<<<hb, 256>>>(dht, hs, seed, 14, 1.0);
      a.dht = dht;
    }
    CK(cudaGetLastError());
    a.q = q;
    a.k = k;
    a.v = v;
    a.dout = dout;
    a.g = g;
    a.beta = beta;
    a.dq = dalloc<__nv_bfloat16>(tok * KD);
    a.dk = dalloc<__nv_bfloat16>(tok * KD);
    a.dv = dalloc<__nv_bfloat16>(tok * VD);
    a.dg = dalloc<float>(tok);
    a.dbeta = dalloc<float>(tok);
    GdnBwdArgs sized;  // the sizes and member as gdn_bwd_workspace_bytes(B, T, H, 0, 0, KD, true, 1, segs), and chunk_inputs_kept
    sized.B = p.B;
    sized.T = p.T;
    sized.H = p.H;
    sized.D = KD;
    sized.segs = p.segs;
    sized.chunk_inputs_kept = chunk_inputs_kept;
    ws = dalloc<char>(glr::cuda::sm90::gdn_bwd_workspace_bytes(sized) + 256);
    glr::cuda::sm90::gdn_bwd_workspace_carve(a, ws);
    // the forward, for timing: its own output, rung 3's workspace
    f.q = q;
    f.k = k;
    f.v = v;
    f.g = g;
    f.beta = beta;
    f.h0 = a.h0;
    f.o = dalloc<__nv_bfloat16>(tok * VD);
    f.B = p.B;
    f.T = p.T;
    f.H = p.H;
    glr::cuda::sm90::gdn_bwd::set_value_heads(f, p.H);
    f.scale = a.scale;
    // Room for rung 3's workspace in either layout of gdn_fwd_mma.cuh (per chunk T, G, beta; a later version adds a
    // 256-byte header and rounds each piece to 256 bytes), so this program does not depend on its size function.
    const std::size_t rows = static_cast<std::size_t>(p.B) * p.H * ((p.T + 63) / 64) * 64;
    fws = dalloc<char>(rows * (64 * 2 + 4 + 4) + 4096);
    glr::cuda::sm90::gdn_fwd_workspace_carve(f, fws, glr::cuda::sm90::GdnFwdVariant::t_only);
  }
  ~Buffers() {
    const void* all[] = {a.q, a.k, a.v, a.dout, a.g, a.beta, a.h0, a.dht, a.dq, a.dk, a.dv, a.dg, a.dbeta, a.dh0, f.o, ws, fws};
    for (const void* x : all)
      if (x) cudaFree(const_cast<void*>(x));
  }
  // The six outputs (dq, dk, dv, dg, dbeta, dh0), their bytes (dh0: 0 without h0), and device copies of them (each
  // to cudaFree).
  std::array<const void*, 6> outputs() const { return {a.dq, a.dk, a.dv, a.dg, a.dbeta, a.dh0}; }
  std::array<std::size_t, 6> output_bytes() const {
    const std::size_t t = static_cast<std::size_t>(tok);
    return {t * KD * 2, t * KD * 2, t * VD * 2, t * 4, t * 4, a.dh0 ? static_cast<std::size_t>(hs) * 4 : 0};
  }
  std::array<void*, 6> snapshot() const {
    std::array<void*, 6> copy{};
    for (int i = 0; i < 6; ++i) {
      copy[i] = dalloc<char>(output_bytes()[i]);
      if (output_bytes()[i]) CK(cudaMemcpy(copy[i], outputs()[i], output_bytes()[i], cudaMemcpyDeviceToDevice));
    }
    return copy;
  }
  // Outputs poisoned with NaN (0xFFFF bf16, 0xFFFFFFFF fp32) first: an unwritten element fails the check.
  void run_poisoned(int vt) {
    CK(cudaMemset(a.dq, 0xFF, tok * KD * 2));
    CK(cudaMemset(a.dk, 0xFF, tok * KD * 2));
    CK(cudaMemset(a.dv, 0xFF, tok * VD * 2));
    CK(cudaMemset(a.dg, 0xFF, tok * 4));
    CK(cudaMemset(a.dbeta, 0xFF, tok * 4));
    if (a.dh0) CK(cudaMemset(a.dh0, 0xFF, hs * 4));
    CK(glr::cuda::sm90::gdn_bwd_mma(a, nullptr, nullptr, vt));
    CK(cudaDeviceSynchronize());
  }
};

bool check(const Problem& p, std::uint64_t seed) {
  Buffers buf(p, seed);
  const std::int64_t tok = buf.tok, hs = buf.hs;
  const int NT = (p.T + 63) / 64;
  RefOut r;
  r.dq = dalloc<double>(tok * KD);
  r.dk = dalloc<double>(tok * KD);
  r.dv = dalloc<double>(tok * VD);
  r.dg = dalloc<double>(tok);
  r.dbeta = dalloc<double>(tok);
  r.dh0 = dalloc<double>(hs);
  r.ckpt = dalloc<double>(static_cast<std::size_t>(p.B) * p.H * (NT + 1) * KV);
  r.blk = dalloc<double>(static_cast<std::size_t>(p.B) * p.H * 65 * KV);
  namespace ref = glr::sm90_bwd_reference;
  CK(cudaFuncSetAttribute(ref::reference, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(ref::kSmemBytes)));
  ref::reference<<<p.B * p.H, 128, ref::kSmemBytes>>>(buf.a, r);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());

  bool all = true;
  std::vector<void*> at64(6, nullptr);  // vt 64's outputs: the other widths should match them bit for bit but dbeta
  for (int vt : {64, 32, 16}) {  // the state slice widths of the h and dh kernels (the launcher picks one by B H)
    buf.run_poisoned(vt);
    const Err e[6] = {error_of(buf.a.dq, r.dq, tok * KD), error_of(buf.a.dk, r.dk, tok * KD),
                      error_of(buf.a.dv, r.dv, tok * VD), error_of(static_cast<const float*>(buf.a.dg), r.dg, tok),
                      error_of(static_cast<const float*>(buf.a.dbeta), r.dbeta, tok), p.h0 ? error_of(buf.a.dh0, r.dh0, hs) : Err{}};
    // Second run, outputs poisoned again: bitwise equal.
    const std::size_t bytes[6] = {static_cast<std::size_t>(tok) * KD * 2, static_cast<std::size_t>(tok) * KD * 2,
                                  static_cast<std::size_t>(tok) * VD * 2, static_cast<std::size_t>(tok) * 4,
                                  static_cast<std::size_t>(tok) * 4, p.h0 ? static_cast<std::size_t>(hs) * 4 : 0};
    const void* outs[6] = {buf.a.dq, buf.a.dk, buf.a.dv, buf.a.dg, buf.a.dbeta, buf.a.dh0};
    std::vector<void*> first(6, nullptr);
    for (int i = 0; i < 6; ++i) {
      first[i] = dalloc<char>(bytes[i]);
      if (bytes[i]) CK(cudaMemcpy(first[i], outs[i], bytes[i], cudaMemcpyDeviceToDevice));
    }
    buf.run_poisoned(vt);
    unsigned long long diff = 0, across = 0;
    for (int i = 0; i < 6; ++i) {
      diff += differing_words(first[i], outs[i], bytes[i]);
      if (vt == 64)
        at64[i] = first[i];
      else {
        if (i != 4) across += differing_words(at64[i], outs[i], bytes[i]);
        CK(cudaFree(first[i]));
      }
    }
    const double u = std::ldexp(1.0, -9);
    const char* names[6] = {"dq", "dk", "dv", "dg", "dbeta", "dh0"};
    const double bound[6] = {8 * u, 8 * u, 8 * u, 16 * u, 8 * u, 8 * u};
    bool pass = diff == 0;
    std::printf("B%-2d T%-5d H%-2d h0=%d dht=%d mu=%+.0f vt=%-2d%s |", p.B, p.T, p.H, p.h0 ? 1 : 0, p.dht ? 1 : 0, p.mu, vt,
                p.segs > 1 ? (" split " + std::to_string(p.segs)).c_str() : "");
    for (int i = 0; i < 6; ++i) {
      if (i == 5 && !p.h0) {
        std::printf(" dh0 -");
        continue;
      }
      const bool ok = e[i].bad == 0 && e[i].rel2 <= bound[i];
      pass = pass && ok;
      std::printf(" %s %.2e/%.2e%s", names[i], e[i].rel2, e[i].relmax, ok ? "" : (e[i].bad ? " NONFINITE" : " OVER"));
    }
    // Informational: the slice width only regroups dbeta's rowsum(dX . V); every other output should be the same bits.
    if (vt != 64) std::printf(" | vs vt=64, words differing outside dbeta %llu", across);
    std::printf(" | run-to-run differing words %llu | %s\n", diff, pass ? "PASS" : "FAIL");
    std::fflush(stdout);
    all = all && pass;
  }
  for (void* x : at64) CK(cudaFree(x));
  for (double* x : {r.dq, r.dk, r.dv, r.dg, r.dbeta, r.dh0, r.ckpt, r.blk}) CK(cudaFree(x));
  return all;
}

// The forward's saved wy outputs (glr::cuda::Saved; gdn_wy_saved_carve, gdn_bwd_use_saved): rung 3 with a saved
// block, then the backward from it, against the backward that recomputes them: every output word for word the same
// (tolerance-free), outputs poisoned before each run, and beta and Gr (which the saved run forms again) before it.
bool check_saved(const Problem& p, std::uint64_t seed) {
  Buffers buf(p, seed);
  GdnFwdArgs f = buf.f;
  void* saved = dalloc<char>(glr::cuda::sm90::gdn_wy_saved_bytes(f));
  glr::cuda::sm90::gdn_wy_saved_carve(f, saved);
  CK(glr::cuda::sm90::gdn_fwd_mma(f, nullptr));
  buf.run_poisoned(0);
  const std::array<void*, 6> recomputed = buf.snapshot();
  const GdnBwdArgs plain = buf.a;
  // the recomputing run left beta and Gr in the workspace: poisoned (NaN), so the saved run's wy_scalars_kernel must
  // write them again
  const std::size_t scalars = static_cast<std::size_t>(buf.a.chunk_slots()) * buf.a.value_heads() * 64 * 4;
  CK(cudaMemset(buf.a.Bc, 0xff, scalars));
  CK(cudaMemset(buf.a.Gr, 0xff, scalars));
  glr::cuda::sm90::gdn_bwd_use_saved(buf.a, saved);
  buf.run_poisoned(0);
  buf.a = plain;
  unsigned long long diff = 0;
  for (int i = 0; i < 6; ++i) {
    diff += differing_words(recomputed[i], buf.outputs()[i], buf.output_bytes()[i]);
    CK(cudaFree(recomputed[i]));
  }
  CK(cudaFree(saved));
  std::printf("B%-2d T%-5d H%-2d h0=%d dht=%d mu=%+.0f%s | saved wy outputs (the forward's) vs recomputed: words "
              "differing %llu | %s\n",
              p.B, p.T, p.H, p.h0 ? 1 : 0, p.dht ? 1 : 0, p.mu, p.segs > 1 ? (" split " + std::to_string(p.segs)).c_str() : "",
              diff, diff == 0 ? "PASS" : "FAIL");
  std::fflush(stdout);
  return diff == 0;
}

// The h pass on wgmma (GLR_H_WGMMA=1's kernels) against h_kernel on one workspace, slices of 64 columns, p.segs
// segments (gdn_bwd::launch_h_pass both ways after a backward that leaves the wy outputs): per piece (h_c, V_new,
// its residual) the bf16 words that differ and the largest difference over the piece's rms. The emulator finds 0
// words; here the two instructions may order a k-step's sums differently, and the recurrence carries such roundings
// on. Informational: stage 7 (GLR_H_WGMMA=1 --check) judges the backward against float64.
void check_h_pass(const Problem& p, std::uint64_t seed) {
  namespace gb = glr::cuda::sm90::gdn_bwd;
  Buffers buf(p, seed, true);  // (V_new and its residual stored: compared below)
  CK(glr::cuda::sm90::gdn_bwd_mma(buf.a, nullptr));
  const GdnBwdArgs& a = buf.a;
  const std::size_t S = static_cast<std::size_t>(a.chunk_slots()) * a.value_heads();
  const std::size_t n[3] = {S * KD * VD, S * 64 * VD, S * 64 * VD};
  const __nv_bfloat16* piece[3] = {a.hc, a.vn, a.vnl};
  std::vector<__nv_bfloat16> ref[3], got[3];
  auto take = [&](std::vector<__nv_bfloat16>* out) {
    CK(cudaDeviceSynchronize());
    for (int i = 0; i < 3; ++i) {
      out[i].resize(n[i]);
      CK(cudaMemcpy(out[i].data(), piece[i], n[i] * 2, cudaMemcpyDeviceToHost));
    }
  };
  auto h_pass = [&](bool wgmma) { return gb::launch_h_pass<64, KD, true>(a, nullptr, wgmma); };
  CK(h_pass(false));
  take(ref);
  CK(h_pass(true));
  take(got);
  std::string line;
  const char* names[3] = {"h_c", "V_new", "residual"};
  for (int i = 0; i < 3; ++i) {
    std::size_t words = 0, unlike = 0;
    double r2 = 0, dmax = 0;
    for (std::size_t j = 0; j < n[i]; ++j) {
      const double x = __bfloat162float(ref[i][j]), y = __bfloat162float(got[i][j]);
      if (std::memcmp(&ref[i][j], &got[i][j], 2) != 0) ++words;
      if (std::isfinite(x) != std::isfinite(y)) ++unlike;
      if (std::isfinite(x) && std::isfinite(y)) {
        r2 += x * x;
        dmax = std::max(dmax, std::fabs(x - y));
      }
    }
    char buf2[160];
    std::snprintf(buf2, sizeof buf2, " %s %zu of %zu words differ, max |diff|/rms %.1e%s;", names[i], words, n[i],
                  r2 > 0 ? dmax / std::sqrt(r2 / static_cast<double>(n[i])) : 0.0,
                  unlike ? (" (" + std::to_string(unlike) + " finite in one only)").c_str() : "");
    line += buf2;
  }
  std::printf("B%-2d T%-5d H%-2d mu=%+.0f%s | h pass on wgmma vs h_kernel (slices of 64):%s informational\n", p.B, p.T,
              p.H, p.mu, p.segs > 1 ? (" split " + std::to_string(p.segs)).c_str() : "", line.c_str());
  std::fflush(stdout);
}

double median(std::vector<float> x) {
  std::sort(x.begin(), x.end());
  return 0.5 * (x[x.size() / 2 - 1] + x[x.size() / 2]);
}

// Medians over `reps` runs of the forward (f, if given; 0 otherwise) and the backward's kernels between its marks
// (wy, h, dh, chunk: gdn_bwd_mma's three events), and the backward's total; vt as gdn_bwd_mma takes it. CUDA events.
struct PhaseTimes {
  double fwd, wy, h, dh, chunk, bwd;
};
PhaseTimes time_phases(const GdnFwdArgs* f, const GdnBwdArgs& a, cudaStream_t st, int vt = 0, int reps = 20) {
  cudaEvent_t ev[6];
  for (auto& e : ev) CK(cudaEventCreate(&e));
  std::vector<float> x[5], bwd;
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(ev[0], st));
    if (f) CK(glr::cuda::sm90::gdn_fwd_mma(*f, st));
    CK(cudaEventRecord(ev[1], st));
    CK(glr::cuda::sm90::gdn_bwd_mma(a, st, &ev[2], vt));
    CK(cudaEventRecord(ev[5], st));
    CK(cudaEventSynchronize(ev[5]));
    float t[5];
    for (int j = 0; j < 5; ++j) CK(cudaEventElapsedTime(&t[j], ev[j], ev[j + 1]));
    for (int j = 0; j < 5; ++j) x[j].push_back(t[j]);
    bwd.push_back(t[1] + t[2] + t[3] + t[4]);
  }
  for (auto& e : ev) CK(cudaEventDestroy(e));
  return {f ? median(x[0]) : 0.0, median(x[1]), median(x[2]), median(x[3]), median(x[4]), median(bwd)};
}

// The backward from the forward's saved wy outputs (no wy kernel; wy_scalars_kernel forms beta and Gr): its total and
// the forward that saves them. Informational only.
void timing_saved(int B, int T, int H) {
  Buffers buf(Problem{B, T, H, false, false, 2.0}, 7);
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  GdnFwdArgs f = buf.f;
  const std::size_t saved_bytes = glr::cuda::sm90::gdn_wy_saved_bytes(f);
  void* saved = dalloc<char>(saved_bytes);
  glr::cuda::sm90::gdn_wy_saved_carve(f, saved);
  GdnBwdArgs a = buf.a;
  glr::cuda::sm90::gdn_bwd_use_saved(a, saved);
  for (int i = 0; i < 3; ++i) {
    CK(glr::cuda::sm90::gdn_fwd_mma(f, st));
    CK(glr::cuda::sm90::gdn_bwd_mma(a, st));
  }
  const PhaseTimes t = time_phases(&f, a, st);
  std::printf("timing B%d T%d H%d saved wy outputs (%.1f MB): fwd saving %.3f ms | bwd from them %.3f ms (beta, Gr "
              "%.3f, h %.3f, dh %.3f, chunk %.3f; no wy) | fwd+bwd %.3f ms\n",
              B, T, H, saved_bytes / 1e6, t.fwd, t.bwd, t.wy, t.h, t.dh, t.chunk, t.fwd + t.bwd);
  std::fflush(stdout);
  CK(cudaFree(saved));
  CK(cudaStreamDestroy(st));
}

template <int kVT>
void print_residency(int B, int T, int H) {
  namespace gb = glr::cuda::sm90::gdn_bwd;
  int nh = 0, nd = 0, nc = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nh, gb::h_kernel<kVT>, 128, sizeof(gb::HSmem<kVT>)));
  const bool wg = glr::cuda::sm90::bwd_chunk_wgmma(), dh_wg = glr::cuda::sm90::bwd_dh_wgmma(false);
  const bool dh2 = kVT == 64 && glr::cuda::sm90::bwd_dh_2gemm();  // GLR_DH_2GEMM=1: dh2_kernel, 256 threads
  const std::size_t dh_smem = dh2     ? gb::dh2_smem_bytes<128>
                              : dh_wg ? gb::dh_wgmma_smem_bytes<kVT, 128>
                                      : sizeof(gb::DhSmem<kVT>);
  if (dh2)
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nd, gb::dh2_kernel<128>, gb::kDh2Threads, dh_smem));
  else if (dh_wg)
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nd, gb::dh_wgmma_kernel<kVT>, 128, dh_smem));
  else
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nd, gb::dh_kernel<kVT>, 128, dh_smem));
  const bool tma = wg && glr::cuda::sm90::bwd_chunk_tma();  // chunk_tma_kernel (GLR_BWD_CHUNK_TMA, the default)
  const std::size_t chunk_smem = tma  ? gb::chunk_tma_smem_bytes<128>
                                 : wg ? gb::chunk_wgmma_smem_bytes<128>
                                      : sizeof(gb::ChunkSmem<128>);
  if (tma)
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nc, gb::chunk_tma_kernel<128>, gb::kChunkWgThreads, chunk_smem));
  else if (wg)
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nc, gb::chunk_wgmma_kernel<128>, gb::kChunkWgThreads, chunk_smem));
  else
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nc, gb::chunk_kernel<128>, 128, chunk_smem));
  std::printf("bwd B%d T%d H%d: state slices of %d columns (%d h/dh blocks); resident blocks per SM: h %d (%zu B), "
              "dh%s %d (%zu B), chunk%s %d (%zu B); workspace %.1f MB\n",
              B, T, H, kVT, B * H * (128 / kVT), nh, sizeof(gb::HSmem<kVT>), dh2 ? " (dh2_kernel)" : dh_wg ? " (wgmma)" : "", nd, dh_smem,
              tma ? " (TMA, persistent)" : wg ? " (wgmma)" : "", nc, chunk_smem, glr::cuda::sm90::gdn_bwd_workspace_bytes(B, T, H) / 1e6);
}

void timing(int B, int T, int H) {
  Buffers buf(Problem{B, T, H, false, false, 2.0}, 7);
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  for (int i = 0; i < 3; ++i) {
    CK(glr::cuda::sm90::gdn_fwd_mma(buf.f, st));
    CK(glr::cuda::sm90::gdn_bwd_mma(buf.a, st));
  }
  CK(cudaStreamSynchronize(st));
  const int vt = glr::cuda::sm90::gdn_bwd_slice_width(B * H);
  if (vt == 64) print_residency<64>(B, T, H);
  else if (vt == 32) print_residency<32>(B, T, H);
  else print_residency<16>(B, T, H);
  const PhaseTimes t = time_phases(&buf.f, buf.a, st);
  // DESIGN.md's convention, per token and value head: fwd 2 (3 K V + C (3 K + 2 V)), bwd 2 (8 K V + C (9 K + 5 V)
  // + 2 C^2), C = 64.
  const double n = static_cast<double>(B) * T * H, C = 64;
  const double ff = 2.0 * (3.0 * KD * VD + C * (3.0 * KD + 2.0 * VD)) * n;
  const double fb = 2.0 * (8.0 * KD * VD + C * (9.0 * KD + 5.0 * VD) + 2.0 * C * C) * n;
  const double mf = t.fwd, mb = t.bwd;
  std::printf("timing B%d T%d H%d K=V=128 bf16 (median of 20): fwd %.3f ms %.1f TFLOP/s | bwd %.3f ms %.1f TFLOP/s "
              "(wy %.3f, h %.3f, dh %.3f, chunk %.3f; slices of %d) | fwd+bwd %.3f ms %.1f TFLOP/s\n",
              B, T, H, mf, ff / (mf * 1e-3) / 1e12, mb, fb / (mb * 1e-3) / 1e12, t.wy, t.h, t.dh, t.chunk, vt, mf + mb, (ff + fb) / ((mf + mb) * 1e-3) / 1e12);
  std::fflush(stdout);
  // The other slice widths of the h and dh kernels, for the record (the launcher's choice is the line above).
  for (int w : {64, 32, 16}) {
    if (w == vt) continue;
    const PhaseTimes tw = time_phases(nullptr, buf.a, st, w);
    std::printf("  (bwd B%d T%d H%d with state slices of %d columns instead of %d: %.3f ms; h %.3f, dh %.3f)\n", B, T, H,
                w, vt, tw.bwd, tw.h, tw.dh);
    std::fflush(stdout);
  }
  CK(cudaStreamDestroy(st));
}

// The h pass alone (gdn_bwd::launch_h_pass: split, the forward's passes A and B, then the h kernel) with h_kernel and
// on wgmma (GLR_H_WGMMA=1's kernels, whatever the environment says), segs segments, at the slice width gdn_bwd_mma
// takes; the wgmma pass runs at 64 columns only, so where that width is narrower h_kernel at 64 is timed too. Median
// of 20, CUDA events, after a backward that leaves the wy outputs the pass reads. Informational only.
void timing_h_pass(int B, int T, int H, int segs) {
  namespace gb = glr::cuda::sm90::gdn_bwd;
  Buffers buf(Problem{B, T, H, false, false, 2.0, segs}, 7);
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  for (int i = 0; i < 2; ++i) CK(glr::cuda::sm90::gdn_bwd_mma(buf.a, st));
  const int vt = glr::cuda::sm90::gdn_bwd_slice_width(B * H * segs);
  auto time_h = [&](int w, bool wgmma) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> x;
    for (int i = 0; i < 23; ++i) {
      CK(cudaEventRecord(e0, st));
      const cudaError_t e = w == 64   ? gb::launch_h_pass<64, KD, true>(buf.a, st, wgmma)
                            : w == 32 ? gb::launch_h_pass<32, KD, true>(buf.a, st, wgmma)
                                      : gb::launch_h_pass<16, KD, true>(buf.a, st, wgmma);
      CK(e);
      CK(cudaEventRecord(e1, st));
      CK(cudaEventSynchronize(e1));
      float t = 0;
      CK(cudaEventElapsedTime(&t, e0, e1));
      if (i >= 3) x.push_back(t);  // the first 3: warm-up (and launch_kernel's first attribute call per kernel)
    }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    return median(x);
  };
  const double mma = time_h(vt, false), wg = time_h(64, true);
  std::printf("h pass B%d T%d H%d K=V=128%s (median of 20): h_kernel %.3f ms (slices of %d)", B, T, H,
              segs > 1 ? (" in " + std::to_string(segs) + " segments").c_str() : "", mma, vt);
  if (vt != 64) std::printf(", %.3f ms (slices of 64)", time_h(64, false));
  std::printf(" | on wgmma (GLR_H_WGMMA=1, slices of 64) %.3f ms: %.2fx h_kernel's\n", wg, mma / wg);
  std::fflush(stdout);
  CK(cudaStreamDestroy(st));
}

// The split-sequence h and dh passes (gdn_bwd_split_segments; GdnBwdArgs::segs) against the unsplit ones on one
// workspace: the backward's total and its h and dh passes (h: the forward's passes A and B and the h kernel; dh:
// pass A', the reverse combine, pass C) at 1 segment, the rule's and half and twice it. Informational only.
void timing_split(int B, int T, int H) {
  GdnBwdArgs probe;
  probe.B = B, probe.T = T, probe.H = H, probe.D = KD;
  int sms = 132;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int rule = glr::cuda::sm90::gdn_bwd_split_segments(probe, sms);
  std::vector<int> segs = rule > 1 ? std::vector<int>{1, rule / 2, rule, 2 * rule} : std::vector<int>{1, 4, 8};
  segs.erase(std::remove_if(segs.begin(), segs.end(), [](int s) { return s < 1; }), segs.end());
  segs.erase(std::unique(segs.begin(), segs.end()), segs.end());
  Buffers buf(Problem{B, T, H, false, false, 2.0, segs.back()}, 7);
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  std::printf("split bwd B%d T%d H%d K=V=128 (%d SMs; the rule: %d segments) |", B, T, H, sms, rule);
  for (int s : segs) {
    GdnBwdArgs a = buf.a;
    a.segs = s;
    for (int i = 0; i < 3; ++i) CK(glr::cuda::sm90::gdn_bwd_mma(a, st));
    const PhaseTimes t = time_phases(nullptr, a, st);
    std::printf(" %d seg%s: bwd %.3f ms (h %.3f, dh %.3f; slices of %d) |", s, s == 1 ? " (unsplit)" : "s", t.bwd,
                t.h, t.dh, glr::cuda::sm90::gdn_bwd_slice_width(B * H * s));
  }
  std::printf("\n");
  std::fflush(stdout);
  CK(cudaStreamDestroy(st));
}

}  // namespace

int main(int argc, char** argv) {
  bool do_check = false, do_timing = false, quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--check") == 0) do_check = true;
    else if (std::strcmp(argv[i], "--timing") == 0) do_timing = true;
    else if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    else {
      std::fprintf(stderr, "usage: %s --check [--quick] | --timing\n", argv[0]);
      return 2;
    }
  }
  if (!do_check && !do_timing) do_check = do_timing = true;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  if (glr::cuda::sm90::bwd_fused())  // GLR_FUSED_BWD=1: the dh and chunk kernels below are not launched at K = V = 128
    std::printf("GLR_FUSED_BWD=1: dh pass + chunk kernel as fused_bwd_kernel (gdn_bwd_fused.cuh; one block of 256 threads per "
                "(sequence, head), %zu B shared); in the timing lines its time is the dh column, chunk ~0\n",
                glr::cuda::sm90::gdn_bwd::fused_bwd_smem_bytes<128>);
  std::printf("device %s, sm_%d%d, %d SMs; chunk kernel: %s; dh kernel: %s; h pass: %s\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount,
              !glr::cuda::sm90::bwd_chunk_wgmma() ? "chunk_kernel (mma.sync, GLR_BWD_WGMMA=0)"
              : glr::cuda::sm90::bwd_chunk_tma()  ? "chunk_tma_kernel (wgmma, TMA, persistent grid, GLR_BWD_CHUNK_TMA=1)"
                                                  : "chunk_wgmma_kernel (wgmma)",
              glr::cuda::sm90::bwd_dh_2gemm() ? "dh2_kernel at 64-column slices (GLR_DH_2GEMM=1), else as GLR_DH_WGMMA"
              : glr::cuda::sm90::bwd_dh_wgmma(false) ? "dh_wgmma_kernel (wgmma, GLR_DH_WGMMA=1)"
              : glr::cuda::sm90::bwd_dh_wgmma(true)  ? "dh_kernel unsplit, dh_wgmma_kernel split (GLR_DH_WGMMA unset)"
                                                     : "dh_kernel (mma.sync, GLR_DH_WGMMA=0)",
              glr::cuda::sm90::bwd_h_wgmma() ? "wgmma at 64-column slices (GLR_H_WGMMA=1)" : "h_kernel (mma.sync)");
  bool ok = true;
  if (do_check) {
    const Problem shapes[] = {
        {1, 1, 1, false, false, 2.0},  {1, 33, 1, true, true, 2.0},     {1, 64, 2, false, true, -1.0},
        {2, 100, 3, true, false, 2.0}, {3, 257, 2, false, true, -1.0},  {2, 1000, 4, true, true, 8.0},
        {1, 4096, 2, true, true, 8.0}, {2, 4095, 3, false, false, 4.0}, {2, 4096, 4, true, true, 2.0},
        // the split state passes (forced segments; the rule would not split these), slow decay, h0 and dht: 4
        // segments of 8 chunks, and 3 of 6, 6, 4 chunks (a short last chunk) over two sequences
        {1, 2048, 2, true, true, 8.0, 4}, {2, 1000, 2, true, true, 8.0, 3},
    };
    int i = 0;
    for (const Problem& p : shapes) {
      if (quick && p.T > 300) continue;
      ok = check(p, 1000 + i++) && ok;
    }
    // The forward's saved wy outputs in the backward: bitwise the recomputing backward (a split case among them).
    const Problem saved_shapes[] = {{3, 257, 2, false, true, -1.0}, {2, 1000, 4, true, true, 8.0},
                                    {1, 2048, 2, true, true, 8.0, 4}};
    for (const Problem& p : saved_shapes) {
      if (quick && p.T > 300) continue;
      ok = check_saved(p, 1100 + i++) && ok;
    }
    // The h pass on wgmma against h_kernel, word for word (informational; GLR_H_WGMMA=1 --check is the gate).
    check_h_pass(Problem{2, 1000, 4, true, true, 8.0}, 1200);
    if (!quick) {
      check_h_pass(Problem{2, 4096, 4, true, true, 2.0}, 1201);
      check_h_pass(Problem{1, 2048, 2, true, true, 8.0, 4}, 1202);
    }
    std::printf("%s\n", ok ? "CHECK ALL PASS" : "CHECK SOME FAILED");
  }
  if (do_timing) {
    // The h pass with and without GLR_H_WGMMA's kernels (first: the lines a cut-short stage keeps): B8 T4096 H16,
    // and B1 T32768 H16 in the split rule's segments (8 on 132 SMs) and unsplit (slices of 16).
    {
      GdnBwdArgs probe;
      probe.B = 1, probe.T = 32768, probe.H = 16, probe.D = KD;
      timing_h_pass(8, 4096, 16, 1);
      timing_h_pass(1, 32768, 16, glr::cuda::sm90::gdn_bwd_split_segments(probe, prop.multiProcessorCount));
      timing_h_pass(1, 32768, 16, 1);
    }
    timing(8, 4096, 16);
    timing(4, 8192, 32);
    timing(1, 32768, 16);
    timing_saved(8, 4096, 16);  // the backward without its wy kernel (the forward's saved outputs)
    // The split h and dh passes (few, long sequences): H16 (8 segments by the rule on 132 SMs) and H32, whose h and
    // dh grids (32 value heads) are those of H16 HV32 (4 segments).
    timing_split(1, 32768, 16);
    timing_split(1, 32768, 32);
  }
  return ok ? 0 : 1;
}
