// The argument shapes of the CUDA controls' operator families, checked once here so each control file holds
// only its kernel (and, for a broken one, its defect). A malformed call is the caller's bug: KGATE_ERROR.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_control.cuh"

namespace cctl {

// z = x + y (f32, 1-D, equal lengths).
struct Add {
  Vec<const float> x, y;
  Vec<float> z;
};
inline int32_t parse_add(const kgate_call* c, Add& a) {
  if (int32_t s = check_call(c, 2, 1)) return s;
  if (int32_t s = check_tensor(c, c->inputs[0], "x", Elem::f32, 1)) return s;
  if (int32_t s = check_tensor(c, c->inputs[1], "y", Elem::f32, 1)) return s;
  if (int32_t s = check_tensor(c, c->outputs[0], "z", Elem::f32, 1)) return s;
  a.x = vec<const float>(c->inputs[0]);
  a.y = vec<const float>(c->inputs[1]);
  a.z = vec<float>(c->outputs[0]);
  if (a.x.n != a.z.n || a.y.n != a.z.n) return fail(c, KGATE_ERROR, "x, y and z differ in length");
  return KGATE_OK;
}

// y = f(x), 1-D, equal lengths.
template <class In, class Out>
struct Unary {
  Vec<const In> x;
  Vec<Out> y;
};
template <class In, class Out>
int32_t parse_unary(const kgate_call* c, Elem in, Elem out, Unary<In, Out>& a) {
  if (int32_t s = check_call(c, 1, 1)) return s;
  if (int32_t s = check_tensor(c, c->inputs[0], "x", in, 1)) return s;
  if (int32_t s = check_tensor(c, c->outputs[0], "y", out, 1)) return s;
  a.x = vec<const In>(c->inputs[0]);
  a.y = vec<Out>(c->outputs[0]);
  if (a.x.n != a.y.n) return fail(c, KGATE_ERROR, "x has %lld elements, y %lld", a.x.n, a.y.n);
  return KGATE_OK;
}

// y_i = sum_j x_ij: x f16 M x N, y f32 M.
struct RowSum {
  Mat<const __half> x;
  Vec<float> y;
};
inline int32_t parse_rowsum(const kgate_call* c, RowSum& a) {
  if (int32_t s = check_call(c, 1, 1)) return s;
  if (int32_t s = check_tensor(c, c->inputs[0], "x", Elem::f16, 2)) return s;
  if (int32_t s = check_tensor(c, c->outputs[0], "y", Elem::f32, 1)) return s;
  a.x = mat<const __half>(c->inputs[0]);
  a.y = vec<float>(c->outputs[0]);
  if (a.x.rows != a.y.n) return fail(c, KGATE_ERROR, "x has %lld rows, y %lld elements", a.x.rows, a.y.n);
  return KGATE_OK;
}

// y = softmax(x) along rows, f32 M x N.
struct Rows {
  Mat<const float> x;
  Mat<float> y;
};
inline int32_t parse_rows(const kgate_call* c, Rows& a) {
  if (int32_t s = check_call(c, 1, 1)) return s;
  if (int32_t s = check_tensor(c, c->inputs[0], "x", Elem::f32, 2)) return s;
  if (int32_t s = check_tensor(c, c->outputs[0], "y", Elem::f32, 2)) return s;
  a.x = mat<const float>(c->inputs[0]);
  a.y = mat<float>(c->outputs[0]);
  if (a.x.rows != a.y.rows || a.x.cols != a.y.cols) return fail(c, KGATE_ERROR, "x and y differ in shape");
  return KGATE_OK;
}

// C (M x N, f32) = A (M x K) B (K x N), A and B of dtype `in` (bf16 for candidates, f64 for the oracle).
template <class In, class Out>
struct Matmul {
  Mat<const In> a, b;
  Mat<Out> c;
};
template <class In, class Out>
int32_t parse_matmul(const kgate_call* c, Elem in, Elem out, Matmul<In, Out>& p) {
  if (int32_t s = check_call(c, 2, 1)) return s;
  if (int32_t s = check_tensor(c, c->inputs[0], "A", in, 2)) return s;
  if (int32_t s = check_tensor(c, c->inputs[1], "B", in, 2)) return s;
  if (int32_t s = check_tensor(c, c->outputs[0], "C", out, 2)) return s;
  p.a = mat<const In>(c->inputs[0]);
  p.b = mat<const In>(c->inputs[1]);
  p.c = mat<Out>(c->outputs[0]);
  if (p.b.rows != p.a.cols || p.c.rows != p.a.rows || p.c.cols != p.b.cols)
    return fail(c, KGATE_ERROR, "shapes A %lldx%lld, B %lldx%lld, C %lldx%lld do not chain", p.a.rows, p.a.cols,
                p.b.rows, p.b.cols, p.c.rows, p.c.cols);
  return KGATE_OK;
}

// max that keeps NaN (fmaxf would return the other operand): the reductions the correct kernels use.
__device__ inline float max_keep_nan(float a, float b) { return (a > b || a != a) ? a : b; }

// A fixed-order tree reduction over a block of kThreads threads (deterministic: the same inputs give the
// same bits on every run). `scratch` holds kThreads floats; every thread gets the result.
constexpr int kThreads = 256;
template <class Op>
__device__ float block_reduce(float v, float* scratch, Op op) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) scratch[threadIdx.x] = op(scratch[threadIdx.x], scratch[threadIdx.x + half]);
    __syncthreads();
  }
  const float r = scratch[0];
  __syncthreads();  // scratch is reused by the next reduction
  return r;
}

}  // namespace cctl
