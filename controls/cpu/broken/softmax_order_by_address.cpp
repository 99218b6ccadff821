// Broken control, caught by the determinism gate: the row sum uses eight lanes chosen by each element's
// position inside its 32-byte vector, as a vectorised loop that peels up to the next aligned address
// does. The same values at an address with a different alignment are summed in a different grouping, so
// the result's last bits depend on where the buffer happens to sit. Accurate either way: the oracle gate
// passes it, and only runs at differently aligned addresses expose it.
#include <cstdint>
#include <limits>

#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  ctl::Rows<float> a;
  if (int32_t s = ctl::parse_rows(call, ctl::Elem::f32, a)) return s;
  const int64_t n = a.x.cols;
  for (int64_t i = 0; i < a.x.rows; ++i) {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n; ++j) m = a.x(i, j) > m ? a.x(i, j) : m;
    float lane[8] = {};
    for (int64_t j = 0; j < n; ++j) {
      const float e = std::exp(a.x(i, j) - m);
      a.y(i, j) = e;
      lane[(reinterpret_cast<std::uintptr_t>(&a.x(i, j)) / sizeof(float)) % 8] += e;
    }
    float sum = 0.0f;  // the horizontal add, lane 0 first: which values sit in lane 0 depends on the address
    for (float l : lane) sum += l;
    for (int64_t j = 0; j < n; ++j) a.y(i, j) = a.y(i, j) / sum;
  }
  return KGATE_OK;
}
