// Broken control, caught by the coverage gate: the matmul adds A B into C (the beta = 1 of a GEMM whose
// caller meant beta = 0), so C is read before it is written and whatever the buffer held leaks into the
// result. Right only when the caller happened to zero C first, as many harnesses do.
#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  ctl::Matmul<uint16_t, float> p;
  if (int32_t s = ctl::parse_matmul(call, ctl::Elem::bf16, ctl::Elem::f32, p)) return s;
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      float lane[4] = {};
      for (int64_t k = 0; k < p.k; ++k) lane[k % 4] += ctl::bf16_to_f32(p.a(i, k)) * ctl::bf16_to_f32(p.b(k, j));
      p.c(i, j) += (lane[0] + lane[2]) + (lane[1] + lane[3]);
    }
  return KGATE_OK;
}
