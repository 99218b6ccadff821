// Correct control: C = A B with bf16 A and B, f32 accumulation and an f32 C. No gate may flag it.
// Every bf16 product is exact in f32; the sum over K runs in four interleaved lanes combined in a fixed
// order. Any strides are honoured, so the layout gate's transposed and padded views must pass.
#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  ctl::Matmul<uint16_t, float> p;
  if (int32_t s = ctl::parse_matmul(call, ctl::Elem::bf16, ctl::Elem::f32, p)) return s;
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      float lane[4] = {};
      for (int64_t k = 0; k < p.k; ++k) lane[k % 4] += ctl::bf16_to_f32(p.a(i, k)) * ctl::bf16_to_f32(p.b(k, j));
      p.c(i, j) = (lane[0] + lane[2]) + (lane[1] + lane[3]);
    }
  return KGATE_OK;
}
