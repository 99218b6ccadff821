// Float64 oracle of z = x + y (the inputs arrive widened to f64, exactly).
#include <initializer_list>

#include "control.hpp"

KGATE_CONTROL_ABI_VERSION

extern "C" KGATE_EXPORT int32_t kgate_oracle(const kgate_call* call) {
  if (call->n_inputs != 2 || call->n_outputs != 1) return ctl::fail(call, KGATE_ERROR, "add: expected 2 inputs and 1 output");
  for (const DLTensor* t : std::initializer_list<const DLTensor*>{&call->inputs[0], &call->inputs[1], &call->outputs[0]})
    if (!ctl::has_dtype(*t, ctl::Elem::f64) || t->ndim != 1) return ctl::fail(call, KGATE_ERROR, "add: 1-D f64 tensors expected");
  const auto x = ctl::vec_of<const double>(call->inputs[0]), y = ctl::vec_of<const double>(call->inputs[1]);
  const auto z = ctl::vec_of<double>(call->outputs[0]);
  if (x.n != z.n || y.n != z.n) return ctl::fail(call, KGATE_ERROR, "add: lengths differ");
  for (int64_t i = 0; i < z.n; ++i) z[i] = x[i] + y[i];
  return KGATE_OK;
}
