// tests/glr_sm90/split_dry.cpp: the split-sequence state passes by length (segments.cuh) at production shapes, as a
// launch-sequence dry run (GLR_EMU_DRY=1: launch_kernel checks every launch against an H200's limits, threads,
// grid rows <= 65535, dynamic shared memory within 227 KB and the kernel's attribute, and runs nothing). For each
// shape the rule's plan (gdn_fwd_split_plan, gdn_bwd_split_plan on 132 SMs), the grids' row bounds (seg::rows, slots,
// combs x HV), the workspace, then gdn_fwd_mma and gdn_bwd_mma with stand-in pointers: every launch must be
// accepted. Also each shape forced unsplit (GLR_FORWARD_SPLIT=1's plan) and cut by length at 16 chunks (the
// finest grid a forced L16 gives). No tensor is touched (the pointers are never dereferenced in a dry run).
// Build: ctest target glr_sm90_split_dry (tests/glr_sm90/CMakeLists.txt), or g++ -std=c++20 -O1 -DGLR_SM90_HOST_EMU
// -I/usr/local/cuda/include tests/glr_sm90/split_dry.cpp glr/cuda/sm90/emu/emu_launch.cpp -lpthread. Exit status non-zero on any refusal or failed launch.
#include "../../glr/cuda/sm90/emu/sm90_emu.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using glr::cuda::sm90::GdnBwdArgs;
using glr::cuda::sm90::GdnFwdArgs;
namespace seg = glr::cuda::sm90::seg;

namespace {

template <class T>
T* fake(std::uintptr_t at) {
  return reinterpret_cast<T*>(at);
}

struct Shape {
  const char* name;
  int B, T, H, HV, D;
  std::vector<int> lens;  // packed (B = 1, T = the sum)
};

bool run(const Shape& s, int segs, int len, const char* how) {
  const bool varlen = !s.lens.empty();
  GdnFwdArgs f;
  f.q = f.k = fake<const __nv_bfloat16>(0x10000000);
  f.v = fake<const __nv_bfloat16>(0x20000000);
  f.o = fake<__nv_bfloat16>(0x30000000);
  f.g = fake<const void>(0x40000000);
  f.beta = fake<const void>(0x50000000);
  f.h0 = fake<const float>(0x60000000);
  f.ht = fake<float>(0x70000000);
  f.B = s.B, f.T = s.T, f.H = s.H, f.HV = s.HV, f.D = s.D, f.scale = 0.1f;
  if (varlen) {
    f.N = static_cast<int>(s.lens.size());
    f.cu_seqlens = fake<const std::int64_t>(0x80000000);
  }
  GdnBwdArgs b;
  b.q = b.k = f.q;
  b.v = f.v;
  b.g = f.g;
  b.beta = f.beta;
  b.h0 = f.h0;
  b.dht = f.ht;
  b.dout = f.o;
  b.dq = b.dk = b.dv = fake<__nv_bfloat16>(0x90000000);
  b.dg = b.dbeta = fake<void>(0xa0000000);
  b.dh0 = fake<float>(0xb0000000);
  b.B = s.B, b.T = s.T, b.H = s.H, b.HV = s.HV, b.D = s.D, b.scale = 0.1f;
  if (varlen) {
    b.N = f.N;
    b.cu_seqlens = f.cu_seqlens;
    b.status = fake<std::int32_t>(0xc0000000);
  }
  if (segs == 0) {  // the rule
    const glr::cuda::sm90::SplitPlan p = glr::cuda::sm90::gdn_fwd_split_plan(f, 132);
    f.segs = p.segs, f.seg_len = p.len;
    glr::cuda::sm90::gdn_bwd_split_plan(b, 132);
  } else {
    f.segs = b.segs = segs;
    f.seg_len = b.seg_len = len;
  }
  const std::uintptr_t ws = 0x1000000000ull;
  glr::cuda::sm90::gdn_fwd_workspace_carve(f, reinterpret_cast<void*>(ws), glr::cuda::sm90::GdnFwdVariant::t_only);
  glr::cuda::sm90::gdn_bwd_workspace_carve(b, reinterpret_cast<void*>(ws));
  bool ok = true;
  const char* why = glr::cuda::sm90::gdn_fwd_mma_refusal(f, glr::cuda::sm90::GdnFwdVariant::t_only);
  const char* whyb = glr::cuda::sm90::gdn_bwd_mma_refusal(b);
  cudaError_t ef = cudaErrorInvalidValue, eb = cudaErrorInvalidValue;
  if (!why) ef = glr::cuda::sm90::gdn_fwd_mma(f, nullptr);
  if (!whyb) eb = glr::cuda::sm90::gdn_bwd_mma(b, nullptr);
  ok = !why && !whyb && ef == cudaSuccess && eb == cudaSuccess;
  const long long HV = s.HV;
  std::printf("%-26s %-7s segs %4d len %3d | fwd rows %5lld slots %4lld combs %3lld (x HV), ws %7.1f MB, vt %d | "
              "bwd dh split %d, ws %7.1f MB | %s%s%s\n",
              s.name, how, f.segs, f.seg_len, seg::rows(f) * HV, seg::slots(f) * HV, seg::combs(f) * HV,
              glr::cuda::sm90::gdn_fwd_workspace_bytes(f, glr::cuda::sm90::GdnFwdVariant::t_only) / 1e6,
              glr::cuda::sm90::gdn_fwd_slice_width(f, 132), seg::split(b) && b.dh_split ? 1 : 0,
              glr::cuda::sm90::gdn_bwd_workspace_bytes(b) / 1e6, ok ? "PASS" : "FAIL ", why ? why : whyb ? whyb : "",
              ok ? "" : (ef != cudaSuccess ? " (fwd launch refused)" : " (bwd launch refused)"));
  return ok;
}

}  // namespace

int main() {
  setenv("GLR_EMU_DRY", "1", 1);
  const std::vector<int> packed32k{12288, 5000, 4096, 3001, 2048, 1999, 1500, 1024, 700, 513, 342, 129, 64, 63, 1};
  const Shape shapes[] = {
      {"B1 T32768 H16 K128", 1, 32768, 16, 16, 128, {}},
      {"B1 T32768 H16 HV32 K128", 1, 32768, 16, 32, 128, {}},
      {"B8 T4096 H16 K128", 8, 4096, 16, 16, 128, {}},
      {"varlen32k H16 K128", 1, 32768, 16, 16, 128, packed32k},
      {"varlen32k H16 HV32 K128", 1, 32768, 16, 32, 128, packed32k},
      {"varlen32k H16 K64", 1, 32768, 16, 16, 64, packed32k},
      {"B1 T131072 H16 HV32 K128", 1, 131072, 16, 32, 128, {}},
  };
  bool ok = true;
  for (const Shape& s : shapes) {
    ok = run(s, 0, 1, "rule") && ok;
    ok = run(s, 1, 1, "unsplit") && ok;
    ok = run(s, 4096, 16, "L16") && ok;
    ok = run(s, 4, 1, "count 4") && ok;
  }
  std::printf("%s\n", ok ? "ALL PASS" : "SOME FAILED");
  return ok ? 0 : 1;
}
