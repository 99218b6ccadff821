// The arguments of the three operator families the controls implement (elementwise, row softmax, matmul),
// checked once here so that each control file holds only its kernel and, for a broken one, its defect.
// Each parser returns KGATE_OK or KGATE_ERROR with a message: a malformed call is the caller's bug, never
// an input to refuse.
#pragma once

#include "control.hpp"

namespace ctl {

inline int32_t check_counts(const kgate_call* c, int n_in, int n_out) {
  if (c->abi_version != KGATE_ABI_VERSION) return fail(c, KGATE_ERROR, "caller ABI %d, built for %d", c->abi_version, KGATE_ABI_VERSION);
  if (c->n_inputs != n_in || c->n_outputs != n_out)
    return fail(c, KGATE_ERROR, "expected %d inputs and %d outputs, got %d and %d", n_in, n_out, c->n_inputs, c->n_outputs);
  return KGATE_OK;
}

inline int32_t check_tensor(const kgate_call* c, const DLTensor& t, const char* name, Elem e, int ndim) {
  if (!has_dtype(t, e)) return fail(c, KGATE_ERROR, "%s: unexpected dtype (code %d, %d bits)", name, t.dtype.code, t.dtype.bits);
  if (t.ndim != ndim) return fail(c, KGATE_ERROR, "%s: expected %d dims, got %d", name, ndim, t.ndim);
  if (t.byte_offset != 0) return fail(c, KGATE_ERROR, "%s: byte_offset must be 0", name);
  return KGATE_OK;
}

// y = f(x), one input and one output of the same length.
template <class In, class Out>
struct Unary {
  Vec<const In> x;
  Vec<Out> y;
};
template <class In, class Out>
int32_t parse_unary(const kgate_call* c, Elem in, Elem out, Unary<In, Out>& a) {
  if (int32_t s = check_counts(c, 1, 1)) return s;
  if (int32_t s = check_tensor(c, c->inputs[0], "x", in, 1)) return s;
  if (int32_t s = check_tensor(c, c->outputs[0], "y", out, 1)) return s;
  if (c->inputs[0].shape[0] != c->outputs[0].shape[0])
    return fail(c, KGATE_ERROR, "x has %lld elements, y %lld", static_cast<long long>(c->inputs[0].shape[0]),
                static_cast<long long>(c->outputs[0].shape[0]));
  a.x = vec_of<const In>(c->inputs[0]);
  a.y = vec_of<Out>(c->outputs[0]);
  return KGATE_OK;
}

// y = softmax(x) along each row of an M x N matrix.
template <class T>
struct Rows {
  Mat<const T> x;
  Mat<T> y;
};
template <class T>
int32_t parse_rows(const kgate_call* c, Elem e, Rows<T>& a) {
  if (int32_t s = check_counts(c, 1, 1)) return s;
  if (int32_t s = check_tensor(c, c->inputs[0], "x", e, 2)) return s;
  if (int32_t s = check_tensor(c, c->outputs[0], "y", e, 2)) return s;
  if (c->inputs[0].shape[0] != c->outputs[0].shape[0] || c->inputs[0].shape[1] != c->outputs[0].shape[1])
    return fail(c, KGATE_ERROR, "x and y differ in shape");
  a.x = mat_of<const T>(c->inputs[0]);
  a.y = mat_of<T>(c->outputs[0]);
  return KGATE_OK;
}

// y = the sum of every element of an M x N matrix: a reduction to a scalar (y has rank 0).
template <class T>
struct Total {
  Mat<const T> x;
  T* y = nullptr;
};
template <class T>
int32_t parse_total(const kgate_call* c, Elem e, Total<T>& a) {
  if (int32_t s = check_counts(c, 1, 1)) return s;
  if (int32_t s = check_tensor(c, c->inputs[0], "x", e, 2)) return s;
  if (int32_t s = check_tensor(c, c->outputs[0], "y", e, 0)) return s;
  a.x = mat_of<const T>(c->inputs[0]);
  a.y = static_cast<T*>(c->outputs[0].data);
  return KGATE_OK;
}

// C (M x N) = A (M x K) B (K x N).
template <class In, class Out>
struct Matmul {
  Mat<const In> a, b;
  Mat<Out> c;
  int64_t m = 0, n = 0, k = 0;
};
template <class In, class Out>
int32_t parse_matmul(const kgate_call* c, Elem in, Elem out, Matmul<In, Out>& p) {
  if (int32_t s = check_counts(c, 2, 1)) return s;
  if (int32_t s = check_tensor(c, c->inputs[0], "A", in, 2)) return s;
  if (int32_t s = check_tensor(c, c->inputs[1], "B", in, 2)) return s;
  if (int32_t s = check_tensor(c, c->outputs[0], "C", out, 2)) return s;
  p.a = mat_of<const In>(c->inputs[0]);
  p.b = mat_of<const In>(c->inputs[1]);
  p.c = mat_of<Out>(c->outputs[0]);
  p.m = p.a.rows, p.k = p.a.cols, p.n = p.b.cols;
  if (p.b.rows != p.k || p.c.rows != p.m || p.c.cols != p.n)
    return fail(c, KGATE_ERROR, "shapes A %lldx%lld, B %lldx%lld, C %lldx%lld do not chain", static_cast<long long>(p.a.rows),
                static_cast<long long>(p.a.cols), static_cast<long long>(p.b.rows), static_cast<long long>(p.b.cols),
                static_cast<long long>(p.c.rows), static_cast<long long>(p.c.cols));
  return KGATE_OK;
}

}  // namespace ctl
