// Broken control, caught by the stream gate: the matmul packs B into a static (process-wide) workspace
// before multiplying. One call at a time it is correct; two calls in flight at once (two streams, or two
// threads on the CPU) overwrite each other's packed B while the other is still reading it, and each
// returns a product with the other's B mixed in.
#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

namespace {
// 4096 x 256 covers every shape the contract allows (K <= 4096, N <= 256).
float workspace[4096 * 256];
}  // namespace

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  ctl::Matmul<uint16_t, float> p;
  if (int32_t s = ctl::parse_matmul(call, ctl::Elem::bf16, ctl::Elem::f32, p)) return s;
  if (p.k * p.n > static_cast<int64_t>(sizeof(workspace) / sizeof(float)))
    return ctl::fail(call, KGATE_REFUSED, "K x N = %lld exceeds the workspace", static_cast<long long>(p.k * p.n));
  float* bt = workspace;  // (N, K)
  for (int64_t j = 0; j < p.n; ++j)
    for (int64_t k = 0; k < p.k; ++k) bt[j * p.k + k] = ctl::bf16_to_f32(p.b(k, j));
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      const float* col = bt + j * p.k;
      float lane[4] = {};
      for (int64_t k = 0; k < p.k; ++k) lane[k % 4] += ctl::bf16_to_f32(p.a(i, k)) * col[k];
      p.c(i, j) = (lane[0] + lane[2]) + (lane[1] + lane[3]);
    }
  return KGATE_OK;
}
