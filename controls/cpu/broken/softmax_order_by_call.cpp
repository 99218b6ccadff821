// Broken control, caught by the determinism gate: the row sum's eight partial sums are added in an order
// that changes from call to call (a counter stands in for split reductions whose atomics land in whatever
// order the hardware finishes them). Every order is an accurate f32 sum, so the oracle gate passes it;
// only a bitwise comparison of repeated runs sees the last bits move.
#include <atomic>
#include <limits>

#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

namespace {
std::atomic<unsigned> calls{0};
}

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  ctl::Rows<float> a;
  if (int32_t s = ctl::parse_rows(call, ctl::Elem::f32, a)) return s;
  const unsigned first = calls.fetch_add(1, std::memory_order_relaxed) % 8;
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
    float sum = 0.0f;
    for (unsigned l = 0; l < 8; ++l) sum += lane[(first + l) % 8];
    for (int64_t j = 0; j < n; ++j) a.y(i, j) = a.y(i, j) / sum;
  }
  return KGATE_OK;
}
