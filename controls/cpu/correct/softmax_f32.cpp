// Correct control: numerically stable row softmax in f32. No gate may flag it.
// The row sum runs in eight interleaved lanes combined in a fixed tree, as a vectorised kernel would:
// deterministic, independent of addresses, and more accurate than one running sum. Exponentials are
// stored in y first and scaled in place, so y is written before it is read.
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
      lane[j % 8] += e;
    }
    const float sum = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
    for (int64_t j = 0; j < n; ++j) a.y(i, j) = a.y(i, j) / sum;
  }
  return KGATE_OK;
}
