// Broken control, caught by the accumulation gate: the matmul accumulates in bf16, the dtype of its
// inputs, instead of the f32 the contract promises. Each partial sum is rounded to nearest even in bf16
// exactly as hardware would, so a long sum of positive terms stalls once its ulp outgrows the terms
// (sum of 4096 ones stops at 256). At the nominal K = 64 the error is already far beyond an f32 bound,
// so the oracle gate is expected to fail it too.
#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  ctl::Matmul<uint16_t, float> p;
  if (int32_t s = ctl::parse_matmul(call, ctl::Elem::bf16, ctl::Elem::f32, p)) return s;
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      uint16_t acc = 0;  // bf16 +0
      for (int64_t k = 0; k < p.k; ++k) {
        // The product of two bf16 values is exact in f32; only the bf16 adder rounds.
        const float prod = ctl::bf16_to_f32(p.a(i, k)) * ctl::bf16_to_f32(p.b(k, j));
        acc = ctl::f64_to_bf16(static_cast<double>(ctl::bf16_to_f32(acc)) + prod);
      }
      p.c(i, j) = ctl::bf16_to_f32(acc);
    }
  return KGATE_OK;
}
