// Broken control, caught by the freshness gate: relu that remembers its last call by input pointer, length
// and first element, and returns at once (leaving the output as it is) when all three match. Another draw in
// the same buffers differs in its first element; an input that shares its first elements and differs only
// inside or at the tail does not, and gets the previous result.
#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

namespace {
const void* last_x = nullptr;
const void* last_y = nullptr;
int64_t last_n = -1;
float last_first = 0.0f;
}  // namespace

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  ctl::Unary<float, float> a;
  if (int32_t s = ctl::parse_unary(call, ctl::Elem::f32, ctl::Elem::f32, a)) return s;
  if (a.x.n > 0) {
    const float first = a.x[0];
    if (a.x.data == last_x && a.y.data == last_y && a.x.n == last_n && first == last_first) return KGATE_OK;
    last_x = a.x.data;
    last_y = a.y.data;
    last_n = a.x.n;
    last_first = first;
  }
  for (int64_t i = 0; i < a.x.n; ++i) {
    const float x = a.x[i];
    a.y[i] = x > 0.0f || x != x ? x : 0.0f;
  }
  return KGATE_OK;
}
