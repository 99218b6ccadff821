// Float64 oracle of C = A B. The bf16 inputs arrive widened to f64 (exactly), so every product is exact
// and only the sums round, at a precision far beyond the f32 the contract promises.
#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

extern "C" KGATE_EXPORT int32_t kgate_oracle(const kgate_call* call) {
  ctl::Matmul<double, double> p;
  if (int32_t s = ctl::parse_matmul(call, ctl::Elem::f64, ctl::Elem::f64, p)) return s;
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      double acc = 0.0;
      for (int64_t k = 0; k < p.k; ++k) acc += p.a(i, k) * p.b(k, j);
      p.c(i, j) = acc;
    }
  return KGATE_OK;
}
