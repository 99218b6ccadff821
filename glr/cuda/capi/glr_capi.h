/* glr/cuda/capi/glr_capi.h: a flat C entry point to the CUDA forward and backward, for callers that hold
 * raw device pointers and no C++ (the benchmark loads it with ctypes; nothing is compiled on the GPU
 * machine). Dense row-major layouts only (Params::set_contiguous_strides); every other feature of
 * glr/glr_cuda.hpp is reachable through the C++ API.
 *
 * member:  0 gated_deltanet, 1 deltanet, 2 mamba2, 3 retnet, 4 linear_attention
 * dtype:   0 fp32, 1 fp16, 2 bf16   (x_dtype: q, k, v, o, dout, dq, dk, dv; gate_dtype: g, dg;
 *          beta_dtype: beta, dbeta)
 * cu_seqlens: device int64 offsets [num_seqs + 1] (checked on the device), or NULL with num_seqs = 0.
 * Null pointers for absent tensors (g, beta, h0, ht, dht, dh0, dg, dbeta as the member and flags say).
 * Returns 0, or 1 with a NUL-terminated reason in msg (at most msg_capacity bytes). Never synchronises.
 */
#ifndef GLR_CAPI_H
#define GLR_CAPI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct glr_capi_problem {
  int64_t B, T, H, HV, K, V;
  int32_t member;
  int32_t x_dtype, gate_dtype, beta_dtype;
  int32_t initial_state, final_state;
  double scale;
  const int64_t* cu_seqlens; /* device */
  int64_t num_seqs;
} glr_capi_problem;

int32_t glr_capi_workspace_bytes(const glr_capi_problem* p, int32_t backward, size_t* bytes, char* msg,
                                 size_t msg_capacity);

int32_t glr_capi_forward(const glr_capi_problem* p, const void* q, const void* k, const void* v, const void* g,
                         const void* beta, const void* h0, void* o, void* ht, void* workspace,
                         size_t workspace_bytes, void* stream, char* msg, size_t msg_capacity);

/* Which kernels glr_capi_forward runs for these arguments on the current device: *path = 0 (the block
 * programs) or 1 (the sm90 tensor-core forward), and the one-line reason in msg. Returns 0, or 1 with the
 * error in msg for a call glr_capi_forward would reject. GLR_FORWARD_PATH=blocks in the environment forces 0. */
int32_t glr_capi_forward_path(const glr_capi_problem* p, const void* q, const void* k, const void* v, const void* g,
                              const void* beta, const void* h0, void* o, void* ht, int32_t* path, char* msg,
                              size_t msg_capacity);

/* Which kernels glr_capi_backward runs for these arguments on the current device: *path = 0 (the block
 * programs) or 1 (the sm90 tensor-core backward), and the one-line reason in msg. Returns 0, or 1 with the
 * error in msg for a call glr_capi_backward would reject. GLR_BACKWARD_PATH=blocks in the environment forces 0. */
int32_t glr_capi_backward_path(const glr_capi_problem* p, const void* q, const void* k, const void* v, const void* g,
                               const void* beta, const void* h0, const void* dout, const void* dht, void* dq,
                               void* dk, void* dv, void* dg, void* dbeta, void* dh0, int32_t* path, char* msg,
                               size_t msg_capacity);

int32_t glr_capi_backward(const glr_capi_problem* p, const void* q, const void* k, const void* v, const void* g,
                          const void* beta, const void* h0, const void* dout, const void* dht, void* dq, void* dk,
                          void* dv, void* dg, void* dbeta, void* dh0, void* workspace, size_t workspace_bytes,
                          void* stream, char* msg, size_t msg_capacity);

#ifdef __cplusplus
}
#endif

#endif
