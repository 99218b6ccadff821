// tests/glr_sm90/emu_launch_test.cpp: every launch of the sm90 tensor-core forward and backward as an H200 would take
// it, at production shapes, on the host emulator without running a kernel (GLR_EMU_DRY). What runs is
// glr/cuda/sm90/forward.cu and backward.cu (library glr_sm90_emu: argument setup, split rule on 132 SMs, workspace
// carving, the launchers); each launch goes through launch_kernel (mma_sync.cuh), which sets the kernel's dynamic
// shared-memory limit itself (ensure_dynamic_smem) and, on the emulator, refuses what the H200 refuses: threads
// outside 1..1024, an empty grid or more than 65535 rows, dynamic shared memory over 227 KB or over the kernel's
// attribute. No launcher sets an attribute of its own any more, so a launch over 48 KB passes only if
// launch_kernel's own setting reached the device's side.
//
// First the rules on probe kernels (emu_launch_probe.cpp); then forward, backward, and the forward saving its wy
// outputs for the backward, at each shape below, with the GLR_* switches as the environment sets them (ctests
// glr_sm90_emu_launches*: the defaults, the mma.sync kernels, the opt-in h pass on wgmma and fused sweep); last the
// positive control: every kernel's attribute forgotten on the device's side (as a translation unit's own host stub
// of a template kernel would see it: the H200's failure of 2026-12-05), the backward and the forward at B8 T4096
// H16 must then be refused (CudaError, cudaErrorInvalidValue), not pass. Exits non-zero on any failure. ~1 s.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "common/setup.hpp"
#include "sm90/backward.hpp"
#include "sm90/forward.hpp"

extern "C" int glr_emu_forget_dynamic_smem_limits();
int probe_checks();  // emu_launch_probe.cpp

namespace {

using namespace glr;
using cuda::DType;

// Zeroed host blocks, 256-byte aligned. Large ones are fresh zero pages (calloc over mmap): a dry run touches
// only the status word, so a B1 T32768 HV32 backward costs address space, not memory.
struct Arena {
  std::vector<void*> blocks;
  void* get(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    void* p = std::calloc(bytes + 256, 1);
    if (p == nullptr) throw std::bad_alloc();
    blocks.push_back(p);
    return reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(p) + 255) / 256 * 256);
  }
  ~Arena() {
    for (void* p : blocks) std::free(p);
  }
};

struct Shape {
  const char* name;
  Member member;
  std::int64_t B, T, H, HV, D;
  std::vector<std::int64_t> cu;  // packed sequences' offsets (B = 1), or empty
  bool states = false;           // h0, ht (and dht, dh0)
};

int failures = 0;
void report(bool ok, const std::string& what) {
  std::printf("  %s: %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

Params params_of(const Shape& s) {
  Params p;
  p.B = s.B;
  p.T = s.T;
  p.H = s.H;
  p.HV = s.HV;
  p.K = p.V = s.D;
  p.cu_seqlens = s.cu;
  p.set_member(s.member);
  p.scale = default_scale(s.D);
  p.initial_state = p.final_state = s.states;
  p.set_contiguous_strides();
  return p;
}

// The tensors of one call, bf16 tokens, fp32 g, beta and states, all zero.
struct Call {
  Params p;
  cuda::DeviceOffsets off;
  Arena arena;
  void *q, *k, *v, *g, *beta, *h0, *o, *ht, *dout, *dht, *dq, *dk, *dv, *dg, *dbeta, *dh0;
  explicit Call(const Shape& s) : p(params_of(s)) {
    const std::int64_t rows = p.B * p.T, N = p.num_seqs();
    const auto qk = static_cast<std::size_t>(rows * p.H * p.K) * 2, vv = static_cast<std::size_t>(rows * p.HV * p.V) * 2;
    const auto gs = static_cast<std::size_t>(p.gate == Gate::per_head ? p.HV : rows * p.HV) * 4;
    const auto sc = static_cast<std::size_t>(rows * p.HV) * 4, st = static_cast<std::size_t>(N * p.HV * p.K * p.V) * 4;
    const bool gated = p.gate != Gate::none;
    q = arena.get(qk), k = arena.get(qk), v = arena.get(vv), o = arena.get(vv), dout = arena.get(vv);
    dq = arena.get(qk), dk = arena.get(qk), dv = arena.get(vv);
    g = gated ? arena.get(gs) : nullptr, dg = gated ? arena.get(gs) : nullptr;
    beta = p.delta ? arena.get(sc) : nullptr, dbeta = p.delta ? arena.get(sc) : nullptr;
    h0 = s.states ? arena.get(st) : nullptr, ht = s.states ? arena.get(st) : nullptr;
    dht = s.states ? arena.get(st) : nullptr, dh0 = s.states ? arena.get(st) : nullptr;
    if (p.varlen()) {
      auto* cu = static_cast<std::int64_t*>(arena.get(p.cu_seqlens.size() * sizeof(std::int64_t)));
      for (std::size_t i = 0; i < p.cu_seqlens.size(); ++i) cu[i] = p.cu_seqlens[i];
      off.cu_seqlens = cu;
    }
  }
  cuda::Problem forward() const {
    const cuda::ForwardTensors t{{q, DType::bf16}, {k, DType::bf16}, {v, DType::bf16}, {g, DType::f32},
                                 {beta, DType::f32}, {h0, DType::f32}, {o, DType::bf16}, {ht, DType::f32}};
    return cuda::setup_forward(p, t, off);
  }
  cuda::Problem backward() const {
    const cuda::BackwardTensors t{{q, DType::bf16},    {k, DType::bf16},  {v, DType::bf16},  {g, DType::f32},
                                  {beta, DType::f32},  {h0, DType::f32},  {dout, DType::bf16}, {dht, DType::f32},
                                  {dq, DType::bf16},   {dk, DType::bf16}, {dv, DType::bf16}, {dg, DType::f32},
                                  {dbeta, DType::f32}, {dh0, DType::f32}};
    return cuda::setup_backward(p, t, off);
  }
};

// Runs f; "" if it returned, else the exception's message.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

// Forward, backward, and forward saving for the backward given it: every launch accepted.
void run_shape(const Shape& s) {
  Call c(s);
  const cuda::Problem fp = c.forward(), bp = c.backward();
  const std::string fwhy = cuda::sm90::forward_refusal(fp), bwhy = cuda::sm90::backward_refusal(bp);
  report(fwhy.empty() && bwhy.empty(), std::string(s.name) + ": the sm90 path takes it" +
                                           (fwhy.empty() && bwhy.empty() ? "" : " (refused: " + fwhy + bwhy + ")"));
  if (!fwhy.empty() || !bwhy.empty()) return;
  const std::size_t fws = cuda::sm90::forward_workspace_bytes(fp), bws = cuda::sm90::backward_workspace_bytes(bp);
  const std::size_t sb = cuda::sm90::saved_bytes(fp);
  void* fw = c.arena.get(fws);
  void* bw = c.arena.get(bws);
  void* saved = c.arena.get(sb);
  std::string e = error_of([&] { cuda::sm90::launch_forward(fp, fw, fws, nullptr); });
  report(e.empty(), std::string(s.name) + ": forward" + (e.empty() ? "" : ": " + e));
  e = error_of([&] { cuda::sm90::launch_backward(bp, bw, bws, nullptr); });
  report(e.empty(), std::string(s.name) + ": backward" + (e.empty() ? "" : ": " + e));
  e = error_of([&] {
    cuda::sm90::launch_forward(fp, fw, fws, nullptr, saved, sb);
    cuda::sm90::launch_backward(bp, bw, bws, nullptr, saved, sb);
  });
  report(e.empty(), std::string(s.name) + ": forward saving, backward given it" + (e.empty() ? "" : ": " + e));
}

}  // namespace

int main() {
  failures += probe_checks();

  setenv("GLR_EMU_DRY", "1", 1);  // the launches checked, not run
  std::printf("production shapes, launches checked and not run (GLR_EMU_DRY); switches:");
  for (const char* v : {"GLR_FWD_WGMMA", "GLR_BWD_WGMMA", "GLR_DH_WGMMA", "GLR_H_WGMMA", "GLR_FUSED_BWD",
                        "GLR_FORWARD_SPLIT", "GLR_BACKWARD_SPLIT"})
    if (const char* x = std::getenv(v)) std::printf(" %s=%s", v, x);
  std::printf("\n");
  // 8 packed sequences of uneven lengths, 32768 tokens (a 64-token remainder in most)
  std::vector<std::int64_t> cu{0};
  for (std::int64_t len : {1000, 7000, 3000, 5096, 2500, 6500, 4000, 3672}) cu.push_back(cu.back() + len);
  const Shape shapes[] = {
      {"Gated DeltaNet B8 T4096 H16 K=V=128", Member::gated_deltanet, 8, 4096, 16, 16, 128, {}},
      {"Gated DeltaNet B4 T8192 H32 K=V=128", Member::gated_deltanet, 4, 8192, 32, 32, 128, {}},
      {"Gated DeltaNet B1 T32768 H16 K=V=128 (split)", Member::gated_deltanet, 1, 32768, 16, 16, 128, {}},
      {"Gated DeltaNet B1 T32768 H16 HV32 K=V=128 (split)", Member::gated_deltanet, 1, 32768, 16, 32, 128, {}},
      {"Gated DeltaNet B16 T4096 H16 K=V=64", Member::gated_deltanet, 16, 4096, 16, 16, 64, {}},
      {"Gated DeltaNet packed 32k H16 K=V=128, h0/ht", Member::gated_deltanet, 1, 32768, 16, 16, 128, cu, true},
      {"DeltaNet B1 T32768 H16 K=V=128 (split)", Member::deltanet, 1, 32768, 16, 16, 128, {}},
      {"Mamba2 B8 T4096 H16 K=V=128", Member::mamba2, 8, 4096, 16, 16, 128, {}},
      {"RetNet B8 T4096 H16 K=V=128", Member::retnet, 8, 4096, 16, 16, 128, {}},
      {"linear attention B1 T32768 H16 K=V=64 (split)", Member::linear_attention, 1, 32768, 16, 16, 64, {}},
  };
  for (const Shape& s : shapes) run_shape(s);

  // Positive control: the device's side of every attribute forgotten (launch_kernel's record of what it set kept).
  std::printf("control: every kernel's attribute back to 48 KB on the device's side\n");
  const int forgotten = glr_emu_forget_dynamic_smem_limits();
  report(forgotten > 0, std::to_string(forgotten) + " kernels had a limit over 48 KB set by launch_kernel");
  {
    Call c(shapes[0]);
    const cuda::Problem fp = c.forward(), bp = c.backward();
    const std::size_t fws = cuda::sm90::forward_workspace_bytes(fp), bws = cuda::sm90::backward_workspace_bytes(bp);
    void* fw = c.arena.get(fws);
    void* bw = c.arena.get(bws);
    std::string e = error_of([&] { cuda::sm90::launch_backward(bp, bw, bws, nullptr); });
    report(e.find("cudaErrorInvalidValue") != std::string::npos,
           std::string("control: ") + shapes[0].name + ": backward refused (" + (e.empty() ? "it passed" : e) + ")");
    e = error_of([&] { cuda::sm90::launch_forward(fp, fw, fws, nullptr); });
    report(e.find("cudaErrorInvalidValue") != std::string::npos,
           std::string("control: ") + shapes[0].name + ": forward refused (" + (e.empty() ? "it passed" : e) + ")");
  }
  std::printf(failures == 0 ? "ALL PASS\n" : "FAILED: %d checks\n", failures);
  return failures == 0 ? 0 : 1;
}
