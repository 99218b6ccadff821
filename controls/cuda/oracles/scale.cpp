// Float64 oracle of y = alpha * x (alpha the contract's attr). Rounding to the output dtype, and so
// overflow to Inf, is the caller's: it stores this f64 result in f16 as IEEE 754 says.
#include <cstring>

#include <initializer_list>

#include "control.hpp"

KGATE_CONTROL_ABI_VERSION

extern "C" KGATE_EXPORT int32_t kgate_oracle(const kgate_call* call) {
  if (call->n_inputs != 1 || call->n_outputs != 1) return ctl::fail(call, KGATE_ERROR, "scale: expected 1 input and 1 output");
  for (const DLTensor* t : std::initializer_list<const DLTensor*>{&call->inputs[0], &call->outputs[0]})
    if (!ctl::has_dtype(*t, ctl::Elem::f64) || t->ndim != 1) return ctl::fail(call, KGATE_ERROR, "scale: 1-D f64 tensors expected");
  double alpha = 1.0;
  bool found = false;
  for (int i = 0; i < call->n_attrs; ++i)
    if (std::strcmp(call->attrs[i].name, "alpha") == 0) alpha = call->attrs[i].value, found = true;
  if (!found) return ctl::fail(call, KGATE_ERROR, "scale: the contract must give attrs.alpha");
  const auto x = ctl::vec_of<const double>(call->inputs[0]);
  const auto y = ctl::vec_of<double>(call->outputs[0]);
  if (x.n != y.n) return ctl::fail(call, KGATE_ERROR, "scale: lengths differ");
  for (int64_t i = 0; i < y.n; ++i) y[i] = alpha * x[i];
  return KGATE_OK;
}
