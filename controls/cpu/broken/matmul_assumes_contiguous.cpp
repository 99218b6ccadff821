// Broken control, caught by the layout gate: the matmul indexes A and B as dense row-major arrays
// (A[i*K + k], B[k*N + j]) and never reads their strides. The contract allows strided A and B, and a
// transposed or padded view is read as if it were dense: wrong values, no error. Dense inputs, which
// every other gate passes, are handled correctly.
#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  ctl::Matmul<uint16_t, float> p;
  if (int32_t s = ctl::parse_matmul(call, ctl::Elem::bf16, ctl::Elem::f32, p)) return s;
  const uint16_t* a = p.a.data;
  const uint16_t* b = p.b.data;
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      float lane[4] = {};
      for (int64_t k = 0; k < p.k; ++k) lane[k % 4] += ctl::bf16_to_f32(a[i * p.k + k]) * ctl::bf16_to_f32(b[k * p.n + j]);
      p.c(i, j) = (lane[0] + lane[2]) + (lane[1] + lane[3]);
    }
  return KGATE_OK;
}
