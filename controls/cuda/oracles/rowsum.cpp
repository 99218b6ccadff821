// Float64 oracle of the row sum y_i = sum_j x_ij. The f16 inputs arrive widened to f64 (exactly); rows of
// up to 16384 such values sum with an error far below what the f32 the contract promises could show.
#include "control.hpp"

KGATE_CONTROL_ABI_VERSION

extern "C" KGATE_EXPORT int32_t kgate_oracle(const kgate_call* call) {
  if (call->n_inputs != 1 || call->n_outputs != 1) return ctl::fail(call, KGATE_ERROR, "rowsum: expected 1 input and 1 output");
  if (!ctl::has_dtype(call->inputs[0], ctl::Elem::f64) || call->inputs[0].ndim != 2)
    return ctl::fail(call, KGATE_ERROR, "rowsum: x must be a 2-D f64 tensor");
  if (!ctl::has_dtype(call->outputs[0], ctl::Elem::f64) || call->outputs[0].ndim != 1)
    return ctl::fail(call, KGATE_ERROR, "rowsum: y must be a 1-D f64 tensor");
  const auto x = ctl::mat_of<const double>(call->inputs[0]);
  const auto y = ctl::vec_of<double>(call->outputs[0]);
  if (x.rows != y.n) return ctl::fail(call, KGATE_ERROR, "rowsum: x has %lld rows, y %lld", (long long)x.rows, (long long)y.n);
  for (int64_t i = 0; i < x.rows; ++i) {
    double acc = 0.0;
    for (int64_t j = 0; j < x.cols; ++j) acc += x(i, j);
    y[i] = acc;
  }
  return KGATE_OK;
}
