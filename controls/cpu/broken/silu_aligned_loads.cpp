// Broken control, caught by the layout gate: silu that loads x in 16-byte vectors from x's address
// rounded down to 16 bytes, as an aligned-vector path does when it trusts the allocator's alignment (on
// a GPU the low address bits of a vector load are simply not honoured). With a base one element off,
// every output is computed from its neighbour's input. Stores are scalar, so nothing lands outside y.
#include <cstdint>

#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  ctl::Unary<float, float> a;
  if (int32_t s = ctl::parse_unary(call, ctl::Elem::f32, ctl::Elem::f32, a)) return s;
  const auto address = reinterpret_cast<std::uintptr_t>(a.x.data) & ~std::uintptr_t{15};
  const float* x = reinterpret_cast<const float*>(address);
  for (int64_t i = 0; i < a.x.n; ++i) a.y[i] = x[i] / (1.0f + std::exp(-x[i]));
  return KGATE_OK;
}
