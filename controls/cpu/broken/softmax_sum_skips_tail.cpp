// Broken control, caught by the shapes gate: the row sum walks the row in whole vectors of eight and has
// no tail loop, so when N is not a multiple of 8 the last N % 8 exponentials are missing from the
// denominator (and for N < 8 the sum is 0 and every output Inf). Every output is still written, and at
// the nominal N = 64 the kernel is exact, so only shapes off the multiple-of-8 grid expose it.
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
    for (int64_t j = 0; j < n; ++j) a.y(i, j) = std::exp(a.x(i, j) - m);
    float lane[8] = {};
    for (int64_t j = 0; j + 8 <= n; j += 8)
      for (int l = 0; l < 8; ++l) lane[l] += a.y(i, j + l);
    const float sum = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
    for (int64_t j = 0; j < n; ++j) a.y(i, j) = a.y(i, j) / sum;
  }
  return KGATE_OK;
}
