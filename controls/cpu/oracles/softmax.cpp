// Float64 oracle of the row softmax: y_ij = exp(x_ij - m_i) / sum_j exp(x_ij - m_i), m_i the row maximum.
// Non-finite values follow IEEE arithmetic through this formula: a NaN anywhere in a row makes the whole
// row NaN (through the sum), +Inf makes it NaN (Inf - Inf), -Inf elements give 0 unless the whole row is
// -Inf (then NaN).
#include <limits>

#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

extern "C" KGATE_EXPORT int32_t kgate_oracle(const kgate_call* call) {
  ctl::Rows<double> a;
  if (int32_t s = ctl::parse_rows(call, ctl::Elem::f64, a)) return s;
  for (int64_t i = 0; i < a.x.rows; ++i) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < a.x.cols; ++j) m = a.x(i, j) > m ? a.x(i, j) : m;
    double sum = 0.0;
    for (int64_t j = 0; j < a.x.cols; ++j) sum += std::exp(a.x(i, j) - m);
    for (int64_t j = 0; j < a.x.cols; ++j) a.y(i, j) = std::exp(a.x(i, j) - m) / sum;
  }
  return KGATE_OK;
}
