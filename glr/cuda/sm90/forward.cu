// glr/cuda/sm90/forward.cu: glr's Problem -> GdnFwdArgs, and the launch of rung 3 (see forward.hpp).
#include <cuda_runtime.h>

#include <cstdlib>
#include <string>

#include "forward.hpp"
#include "gdn_fwd_mma.cuh"

namespace glr::cuda::sm90 {
namespace {

bool token_dense(const TensorRef& t, std::int64_t B, std::int64_t T, std::int64_t heads, std::int64_t dim) {
  return t.s[3] == 1 && (heads == 1 || t.s[2] == dim) && (T <= 1 || t.s[1] == heads * dim) &&
         (B <= 1 || t.s[0] == T * heads * dim);
}
bool scalar_dense(const TensorRef& t, std::int64_t B, std::int64_t T, std::int64_t HV) {
  return (HV == 1 || t.s[2] == 1) && (T <= 1 || t.s[1] == HV) && (B <= 1 || t.s[0] == T * HV);
}
bool state_dense(const TensorRef& t, std::int64_t N, std::int64_t HV, std::int64_t K, std::int64_t V) {
  return t.s[3] == 1 && t.s[2] == V && (HV == 1 || t.s[1] == K * V) && (N <= 1 || t.s[0] == HV * K * V);
}

// GLR_FORWARD_SPLIT (forward_split_override, env_switch.hpp): the split-sequence state pass's segments. Unset,
// empty or "auto": the rule, from the shapes and the device's multiprocessor count (gdn_fwd_split_plan: segments by
// length, segments.cuh); a whole number 1 to 4096: every sequence in that many segments (1 = never split); L<m>:
// segments of m chunks by length (for tests and timing).
void env_split(GdnFwdArgs& a) {
  const SplitOverride o = forward_split_override();
  const SplitPlan p = o.segs > 0 ? SplitPlan{o.segs, o.len} : gdn_fwd_split_plan(a, state_slice_sms());
  a.segs = p.segs;
  a.seg_len = p.len;
}

// Sizes, member and pointers; the workspace is carved separately.
GdnFwdArgs args_of(const Problem& p) {
  GdnFwdArgs a;
  a.q = static_cast<const __nv_bfloat16*>(p.q.p);
  a.k = static_cast<const __nv_bfloat16*>(p.k.p);
  a.v = static_cast<const __nv_bfloat16*>(p.v.p);
  a.o = static_cast<__nv_bfloat16*>(p.o.p);
  a.g = p.gate == kGateNone ? nullptr : p.g.p;
  a.g_bf16 = p.gate != kGateNone && p.g.dt == DType::bf16;
  a.beta = p.delta ? p.beta.p : nullptr;
  a.beta_bf16 = p.delta && p.beta.dt == DType::bf16;
  a.h0 = static_cast<const float*>(p.h0.p);
  a.ht = static_cast<float*>(p.ht.p);
  a.B = static_cast<int>(p.B);
  a.T = static_cast<int>(p.T);
  a.H = static_cast<int>(p.H);
  a.HV = static_cast<int>(p.HV);
  a.D = p.K;
  a.scale = static_cast<float>(p.scale);
  a.delta = p.delta != 0;
  a.gate = p.gate;
  if (p.varlen) {
    a.N = static_cast<int>(p.N);
    if (p.cu32)
      a.cu_seqlens32 = static_cast<const std::int32_t*>(p.cu);
    else
      a.cu_seqlens = static_cast<const std::int64_t*>(p.cu);
  }
  env_split(a);
  return a;
}

}  // namespace

std::string forward_refusal(const Problem& p) {
  if (p.K != p.V || (p.K != 64 && p.K != 128))
    return "K = " + std::to_string(p.K) + ", V = " + std::to_string(p.V) + " (takes K = V = 64 or 128)";
  if (p.q.dt != DType::bf16 || p.k.dt != DType::bf16 || p.v.dt != DType::bf16 || p.o.dt != DType::bf16)
    return "q, k, v, o not all bf16";
  if (p.gate != kGateNone && p.g.dt != DType::f32 && p.g.dt != DType::bf16) return "g neither fp32 nor bf16";
  if (p.delta && p.beta.dt != DType::f32 && p.beta.dt != DType::bf16) return "beta neither fp32 nor bf16";
  if ((p.h0.p && p.h0.dt != DType::f32) || (p.ht.p && p.ht.dt != DType::f32)) return "states not fp32";
  if (p.T > 0x3fffffff || p.B * p.T > 0x3fffffff || p.N > 0x3fffffff) return "more than 2^30 tokens or sequences";
  if (!token_dense(p.q, p.B, p.T, p.H, p.K) || !token_dense(p.k, p.B, p.T, p.H, p.K))
    return "q or k not dense [B, T, H, K]";
  if (!token_dense(p.v, p.B, p.T, p.HV, p.V) || !token_dense(p.o, p.B, p.T, p.HV, p.V))
    return "v or o not dense [B, T, HV, V]";
  if (p.gate == kGatePerToken && !scalar_dense(p.g, p.B, p.T, p.HV)) return "g not dense [B, T, HV]";
  if (p.gate == kGatePerHead && !(p.HV == 1 || p.g.s[2] == 1)) return "g not dense [HV]";
  if (p.delta && !scalar_dense(p.beta, p.B, p.T, p.HV)) return "beta not dense [B, T, HV]";
  if ((p.h0.p && !state_dense(p.h0, p.N, p.HV, p.K, p.V)) || (p.ht.p && !state_dense(p.ht, p.N, p.HV, p.K, p.V)))
    return "h0 or ht not dense [N, HV, K, V]";
  GdnFwdArgs a = args_of(p);
  // The kernel's own checks (alignment, grid limits) with a stand-in workspace: only the tensors are judged.
  alignas(256) static char stand_in[256];
  a.status = reinterpret_cast<std::int32_t*>(stand_in);
  a.table = a.segtab = reinterpret_cast<std::int32_t*>(stand_in);
  a.P = reinterpret_cast<__nv_bfloat16*>(stand_in);
  a.G = a.Bc = a.Es = a.Ms = reinterpret_cast<float*>(stand_in);
  if (const char* why = gdn_fwd_mma_refusal(a, GdnFwdVariant::t_only)) return why;
  return "";
}

std::size_t forward_workspace_bytes(const Problem& p) {
  return gdn_fwd_workspace_bytes(args_of(p), GdnFwdVariant::t_only);
}

std::size_t saved_bytes(const Problem& p) { return gdn_wy_saved_bytes(args_of(p)); }

void check_saved(const Problem& p, const void* saved, std::size_t saved_size) {
  const std::size_t need = saved_bytes(p);
  if (reinterpret_cast<std::uintptr_t>(saved) % 256 != 0)
    throw InvalidArgument("saved", "data must be 256-byte aligned");
  if (saved_size < need)
    throw InvalidArgument("saved", std::to_string(saved_size) + " bytes given, " + std::to_string(need) +
                                       " needed (see saved_bytes)");
}

void launch_forward(const Problem& p, void* workspace, std::size_t workspace_bytes, cudaStream_t stream, void* saved,
                    std::size_t saved_size) {
  GdnFwdArgs a = args_of(p);
  const std::size_t need = gdn_fwd_workspace_bytes(a, GdnFwdVariant::t_only);
  if (workspace_bytes < need)
    throw InvalidArgument("workspace", std::to_string(workspace_bytes) + " bytes given, " + std::to_string(need) +
                                           " needed by the sm90 forward (see forward_workspace_bytes)");
  gdn_fwd_workspace_carve(a, workspace, GdnFwdVariant::t_only);
  if (saved) {  // T and G into the caller's block; the state kernel reads them there
    check_saved(p, saved, saved_size);
    gdn_wy_saved_carve(a, saved);
  }
  const cudaError_t e = gdn_fwd_mma(a, stream, GdnFwdVariant::t_only);
  if (e != cudaSuccess)
    throw CudaError(std::string("glr cuda: sm90 forward: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

}  // namespace glr::cuda::sm90
