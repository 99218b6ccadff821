// The flat C entry point (glr_capi.h) over glr/glr_cuda.hpp. Exceptions never cross it: each becomes a
// status 1 and its message.
#include "glr_capi.h"

#include <cstring>
#include <exception>
#include <string>

#include "glr/glr_cuda.hpp"

#define GLR_CAPI_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using namespace glr;

int32_t fail(const std::string& why, char* msg, size_t cap) {
  if (msg && cap) {
    const size_t n = why.size() < cap - 1 ? why.size() : cap - 1;
    std::memcpy(msg, why.data(), n);
    msg[n] = '\0';
  }
  return 1;
}

cuda::DType dtype(int32_t code) {
  switch (code) {
    case 0: return cuda::DType::f32;
    case 1: return cuda::DType::f16;
    case 2: return cuda::DType::bf16;
  }
  throw InvalidArgument("dtype", "unknown dtype code " + std::to_string(code) + " (0 fp32, 1 fp16, 2 bf16)");
}

Params params_of(const glr_capi_problem& c) {
  if (c.member < 0 || c.member > 4) throw InvalidArgument("member", "unknown member code " + std::to_string(c.member));
  Params p;
  p.B = c.B;
  p.T = c.T;
  p.H = c.H;
  p.HV = c.HV;
  p.K = c.K;
  p.V = c.V;
  p.scale = c.scale;
  p.set_member(static_cast<Member>(c.member));
  p.initial_state = c.initial_state != 0;
  p.final_state = c.final_state != 0;
  p.set_contiguous_strides();  // dense states are [N, HV, K, V] whatever N is: device-only offsets need no more
  return p;
}

cuda::DeviceOffsets offsets_of(const glr_capi_problem& c) { return {c.cu_seqlens, c.cu_seqlens ? c.num_seqs : 0}; }

cuda::ForwardTensors forward_tensors(const glr_capi_problem& p, const void* q, const void* k, const void* v,
                                     const void* g, const void* beta, const void* h0, void* o, void* ht) {
  const cuda::DType x = dtype(p.x_dtype), gd = dtype(p.gate_dtype), bd = dtype(p.beta_dtype);
  const cuda::DType f32 = cuda::DType::f32;
  return cuda::ForwardTensors{{q, x}, {k, x}, {v, x}, {g, gd}, {beta, bd}, {h0, f32}, {o, x}, {ht, f32}};
}

cuda::BackwardTensors backward_tensors(const glr_capi_problem& p, const void* q, const void* k, const void* v,
                                       const void* g, const void* beta, const void* h0, const void* dout,
                                       const void* dht, void* dq, void* dk, void* dv, void* dg, void* dbeta,
                                       void* dh0) {
  const cuda::DType x = dtype(p.x_dtype), gd = dtype(p.gate_dtype), bd = dtype(p.beta_dtype);
  const cuda::DType f32 = cuda::DType::f32;
  return cuda::BackwardTensors{{q, x},     {k, x},  {v, x},  {g, gd}, {beta, bd},  {h0, f32}, {dout, x},
                               {dht, f32}, {dq, x}, {dk, x}, {dv, x}, {dg, gd}, {dbeta, bd}, {dh0, f32}};
}

template <class F>
int32_t guarded(char* msg, size_t cap, F&& f) {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    return fail(e.what(), msg, cap);
  } catch (...) {
    return fail("unknown error", msg, cap);
  }
}

}  // namespace

GLR_CAPI_EXPORT int32_t glr_capi_workspace_bytes(const glr_capi_problem* p, int32_t backward, size_t* bytes,
                                                 char* msg, size_t cap) {
  return guarded(msg, cap, [&] {
    const Params prm = params_of(*p);
    *bytes = backward ? cuda::backward_workspace_bytes(prm, offsets_of(*p))
                      : cuda::forward_workspace_bytes(prm, offsets_of(*p));
  });
}

GLR_CAPI_EXPORT int32_t glr_capi_forward(const glr_capi_problem* p, const void* q, const void* k, const void* v,
                                         const void* g, const void* beta, const void* h0, void* o, void* ht,
                                         void* workspace, size_t workspace_bytes, void* stream, char* msg,
                                         size_t cap) {
  return guarded(msg, cap, [&] {
    const Params prm = params_of(*p);
    cuda::forward(prm, forward_tensors(*p, q, k, v, g, beta, h0, o, ht), offsets_of(*p), workspace, workspace_bytes,
                  static_cast<cudaStream_t>(stream));
  });
}

GLR_CAPI_EXPORT int32_t glr_capi_forward_path(const glr_capi_problem* p, const void* q, const void* k, const void* v,
                                              const void* g, const void* beta, const void* h0, void* o, void* ht,
                                              int32_t* path, char* msg, size_t cap) {
  std::string reason;
  const int32_t r = guarded(msg, cap, [&] {
    const cuda::ForwardChoice c =
        cuda::forward_path(params_of(*p), forward_tensors(*p, q, k, v, g, beta, h0, o, ht), offsets_of(*p));
    *path = static_cast<int32_t>(c.path);
    reason = c.reason;
  });
  if (r == 0) fail(reason, msg, cap);  // not a failure: the reason goes where messages go
  return r;
}

GLR_CAPI_EXPORT int32_t glr_capi_backward(const glr_capi_problem* p, const void* q, const void* k, const void* v,
                                          const void* g, const void* beta, const void* h0, const void* dout,
                                          const void* dht, void* dq, void* dk, void* dv, void* dg, void* dbeta,
                                          void* dh0, void* workspace, size_t workspace_bytes, void* stream,
                                          char* msg, size_t cap) {
  return guarded(msg, cap, [&] {
    cuda::backward(params_of(*p), backward_tensors(*p, q, k, v, g, beta, h0, dout, dht, dq, dk, dv, dg, dbeta, dh0),
                   offsets_of(*p), workspace, workspace_bytes, static_cast<cudaStream_t>(stream));
  });
}

GLR_CAPI_EXPORT int32_t glr_capi_backward_path(const glr_capi_problem* p, const void* q, const void* k, const void* v,
                                               const void* g, const void* beta, const void* h0, const void* dout,
                                               const void* dht, void* dq, void* dk, void* dv, void* dg, void* dbeta,
                                               void* dh0, int32_t* path, char* msg, size_t cap) {
  std::string reason;
  const int32_t r = guarded(msg, cap, [&] {
    const cuda::BackwardChoice c = cuda::backward_path(
        params_of(*p), backward_tensors(*p, q, k, v, g, beta, h0, dout, dht, dq, dk, dv, dg, dbeta, dh0), offsets_of(*p));
    *path = static_cast<int32_t>(c.path);
    reason = c.reason;
  });
  if (r == 0) fail(reason, msg, cap);  // not a failure: the reason goes where messages go
  return r;
}
