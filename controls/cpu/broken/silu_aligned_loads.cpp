// Broken control, caught by the layout gate: silu whose loads start from x's address
// rounded down to 16 bytes, as code does that aligns its pointer down to use aligned vector loads and
// forgets to shift its indices by the remainder (it was only ever run on allocator-aligned tensors).
// With a base one element off, every output is computed from its neighbour's input. Stores are scalar,
// so nothing lands outside y.
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
