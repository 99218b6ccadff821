// glr/cuda/sm90/backward.cu: glr's Problem -> GdnBwdArgs, and the launch of the tensor-core backward (see
// backward.hpp).
#include <cuda_runtime.h>

#include <string>

#include "backward.hpp"
#include "forward.hpp"  // check_saved (the saved wy outputs)
#include "gdn_bwd_mma.cuh"

namespace glr::cuda::sm90 {
namespace {

constexpr std::size_t kHeader = 256;  // the status word, then the kernels' workspace (256-byte aligned)

bool token_dense(const TensorRef& t, std::int64_t B, std::int64_t T, std::int64_t heads, std::int64_t dim) {
  return t.s[3] == 1 && (heads == 1 || t.s[2] == dim) && (T <= 1 || t.s[1] == heads * dim) &&
         (B <= 1 || t.s[0] == T * heads * dim);
}
bool scalar_dense(const TensorRef& t, std::int64_t B, std::int64_t T, std::int64_t H) {
  return (H == 1 || t.s[2] == 1) && (T <= 1 || t.s[1] == H) && (B <= 1 || t.s[0] == T * H);
}
bool state_dense(const TensorRef& t, std::int64_t B, std::int64_t H, std::int64_t K, std::int64_t V) {
  return t.s[3] == 1 && t.s[2] == V && (H == 1 || t.s[1] == K * V) && (B <= 1 || t.s[0] == H * K * V);
}

// Sizes, member and pointers; the workspace is carved separately.
GdnBwdArgs args_of(const Problem& p) {
  GdnBwdArgs a;
  a.q = static_cast<const __nv_bfloat16*>(p.q.p);
  a.k = static_cast<const __nv_bfloat16*>(p.k.p);
  a.v = static_cast<const __nv_bfloat16*>(p.v.p);
  a.delta = p.delta != 0;  // the member: the delta rule (kDelta kernels) or not (Mamba2, RetNet, linear attention)
  a.gate = p.gate == kGatePerToken ? 1 : p.gate == kGatePerHead ? 2 : 0;
  a.g = a.gate ? p.g.p : nullptr;
  a.g_bf16 = a.gate && p.g.dt == DType::bf16;  // dg in g's dtype (backward_refusal checks it)
  a.beta = a.delta ? p.beta.p : nullptr;  // no beta, no dbeta without the delta rule
  a.beta_bf16 = a.delta && p.beta.dt == DType::bf16;
  a.h0 = static_cast<const float*>(p.h0.p);
  a.dout = static_cast<const __nv_bfloat16*>(p.dout.p);
  a.dht = static_cast<const float*>(p.dht.p);
  a.dq = static_cast<__nv_bfloat16*>(p.dq.p);
  a.dk = static_cast<__nv_bfloat16*>(p.dk.p);
  a.dv = static_cast<__nv_bfloat16*>(p.dv.p);
  a.dg = a.gate ? p.dg.p : nullptr;
  a.dbeta = a.delta ? p.dbeta.p : nullptr;
  a.dh0 = static_cast<float*>(p.dh0.p);
  a.B = static_cast<int>(p.B);
  a.T = static_cast<int>(p.T);
  a.H = static_cast<int>(p.H);
  a.D = static_cast<int>(p.K);  // K = V (backward_refusal checks it)
  a.HV = static_cast<int>(p.HV);  // grouped value heads: HV a multiple of H
  a.scale = static_cast<float>(p.scale);
  if (p.varlen) {  // packed sequences (B = 1): the offsets as the forward takes them (forward.cu)
    a.N = static_cast<int>(p.N);
    if (p.cu32)
      a.cu_seqlens32 = static_cast<const std::int32_t*>(p.cu);
    else
      a.cu_seqlens = static_cast<const std::int64_t*>(p.cu);
  }
  // GLR_BACKWARD_SPLIT (backward_split_override, env_switch.hpp): the split state passes' segments; unset, empty or
  // "auto": gdn_bwd_split_plan (the forward's rule for the h pass; the dh pass only where few blocks run); a count
  // or L<m> as the forward's, both passes; a trailing h: the h pass only.
  const SplitOverride o = backward_split_override();
  if (o.segs > 0) {
    a.segs = o.segs;
    a.seg_len = o.len;
    a.dh_split = !o.h_only;
  } else {
    gdn_bwd_split_plan(a, state_slice_sms());
  }
  return a;
}

}  // namespace

std::string backward_refusal(const Problem& p) {
  if (p.delta && p.gate == kGatePerHead)
    return "member: the delta rule with a per-head gate (takes gated_deltanet, deltanet, mamba2, retnet, "
           "linear_attention)";
  if (p.K != p.V || (p.K != 64 && p.K != 128))
    return "K = " + std::to_string(p.K) + ", V = " + std::to_string(p.V) + " (takes K = V = 64 or 128)";
  if (p.q.dt != DType::bf16 || p.k.dt != DType::bf16 || p.v.dt != DType::bf16 || p.dout.dt != DType::bf16 ||
      p.dq.dt != DType::bf16 || p.dk.dt != DType::bf16 || p.dv.dt != DType::bf16)
    return "q, k, v, dout, dq, dk, dv not all bf16";
  // g and beta each fp32 or bf16, dg and dbeta in their dtypes (setup_backward's rule; f16 needs f16 q, refused
  // above; f64 only in the emulator's wide dtypes).
  auto f32_or_bf16 = [](DType t) { return t == DType::f32 || t == DType::bf16; };
  if (p.gate != kGateNone && (!f32_or_bf16(p.g.dt) || p.dg.dt != p.g.dt))
    return std::string("g ") + name_of(p.g.dt) + ", dg " + name_of(p.dg.dt) + " (takes fp32 or bf16 g, dg in g's dtype)";
  if (p.delta && (!f32_or_bf16(p.beta.dt) || p.dbeta.dt != p.beta.dt))
    return std::string("beta ") + name_of(p.beta.dt) + ", dbeta " + name_of(p.dbeta.dt) +
           " (takes fp32 or bf16 beta, dbeta in beta's dtype)";
  if ((p.h0.p && p.h0.dt != DType::f32) || (p.dht.p && p.dht.dt != DType::f32) || (p.dh0.p && p.dh0.dt != DType::f32))
    return "states not fp32";
  if (p.HV < p.H || p.HV % p.H != 0)
    return "value heads (HV = " + std::to_string(p.HV) + ", H = " + std::to_string(p.H) + "; takes HV a multiple of H)";
  if (p.T > 0x3fffffff || p.B * p.T > 0x3fffffff || p.N > 0x3fffffff) return "more than 2^30 tokens or sequences";
  if (!token_dense(p.q, p.B, p.T, p.H, p.K) || !token_dense(p.k, p.B, p.T, p.H, p.K) ||
      !token_dense(p.dq, p.B, p.T, p.H, p.K) || !token_dense(p.dk, p.B, p.T, p.H, p.K))
    return "q, k, dq or dk not dense [B, T, H, K]";
  if (!token_dense(p.v, p.B, p.T, p.HV, p.V) || !token_dense(p.dout, p.B, p.T, p.HV, p.V) ||
      !token_dense(p.dv, p.B, p.T, p.HV, p.V))
    return "v, dout or dv not dense [B, T, HV, V]";
  if (p.gate == kGatePerToken && (!scalar_dense(p.g, p.B, p.T, p.HV) || !scalar_dense(p.dg, p.B, p.T, p.HV)))
    return "g or dg not dense [B, T, HV]";
  if (p.gate == kGatePerHead && !(p.HV == 1 || (p.g.s[2] == 1 && p.dg.s[2] == 1))) return "g or dg not dense [HV]";
  if (p.delta && (!scalar_dense(p.beta, p.B, p.T, p.HV) || !scalar_dense(p.dbeta, p.B, p.T, p.HV)))
    return "beta or dbeta not dense [B, T, HV]";
  for (const TensorRef* s : {&p.h0, &p.dht, &p.dh0})
    if (s->p && !state_dense(*s, p.N, p.HV, p.K, p.V)) return "h0, dht or dh0 not dense [N, HV, K, V]";
  GdnBwdArgs a = args_of(p);
  // The kernels' own checks (alignment, grid limits) with a stand-in workspace: only the tensors are judged.
  alignas(256) static char stand_in[256];
  a.Tm = a.hc = a.dhc = a.dhcl = a.vn = a.vnl = a.dx = reinterpret_cast<__nv_bfloat16*>(stand_in);
  a.G = a.Bc = a.Gr = a.dbv = a.dqp = a.dkp = a.Es = a.Ms = reinterpret_cast<float*>(stand_in);
  a.status = a.table = a.segtab = reinterpret_cast<std::int32_t*>(stand_in);
  if (const char* why = gdn_bwd_mma_refusal(a)) return why;
  return "";
}

std::size_t backward_workspace_bytes(const Problem& p) {
  return kHeader + gdn_bwd_workspace_bytes(args_of(p));  // the sizes and the member (the pieces it uses)
}

void launch_backward(const Problem& p, void* workspace, std::size_t workspace_bytes, cudaStream_t stream, void* saved,
                     std::size_t saved_size) {
  const std::size_t need = backward_workspace_bytes(p);
  if (workspace_bytes < need)
    throw InvalidArgument("workspace", std::to_string(workspace_bytes) + " bytes given, " + std::to_string(need) +
                                           " needed by the sm90 backward (see backward_workspace_bytes)");
  GdnBwdArgs a = args_of(p);
  gdn_bwd_workspace_carve(a, static_cast<char*>(workspace) + kHeader);
  a.status = static_cast<std::int32_t*>(workspace);  // packed sequences: the chunk table kernel's verdict (0 or 1)
  if (saved) {  // the forward's wy outputs (forward.cu check_saved: the same sizes as saved_bytes(p))
    check_saved(p, saved, saved_size);
    gdn_bwd_use_saved(a, saved);
  }
  cudaError_t e = cudaMemsetAsync(workspace, 0, sizeof(std::int32_t), stream);  // status: ok
  if (e == cudaSuccess) e = gdn_bwd_mma(a, stream);
  if (e != cudaSuccess)
    throw CudaError(std::string("glr cuda: sm90 backward: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

}  // namespace glr::cuda::sm90
