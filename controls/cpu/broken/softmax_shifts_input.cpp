// Broken control, caught by the immutability gate: the softmax subtracts the row maximum in place, in
// the input x, to save a scratch buffer. Its outputs are right, and running it again on the shifted
// input gives the same bits (the new maximum is 0), so only a byte comparison of the input sees it.
#include <limits>

#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  ctl::Rows<float> a;
  if (int32_t s = ctl::parse_rows(call, ctl::Elem::f32, a)) return s;
  // The defect: the input is treated as writable scratch.
  const ctl::Mat<float> x{const_cast<float*>(a.x.data), a.x.rows, a.x.cols, a.x.row_stride, a.x.col_stride};
  const int64_t n = x.cols;
  for (int64_t i = 0; i < x.rows; ++i) {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n; ++j) m = x(i, j) > m ? x(i, j) : m;
    for (int64_t j = 0; j < n; ++j) x(i, j) -= m;
    float lane[8] = {};
    for (int64_t j = 0; j < n; ++j) {
      const float e = std::exp(x(i, j));
      a.y(i, j) = e;
      lane[j % 8] += e;
    }
    const float sum = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
    for (int64_t j = 0; j < n; ++j) a.y(i, j) = a.y(i, j) / sum;
  }
  return KGATE_OK;
}
