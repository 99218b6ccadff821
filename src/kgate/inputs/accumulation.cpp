// Inputs shaped so that low-precision accumulation fails grossly: long sums of equal or same-sign terms,
// where an fp16 partial sum overflows or a bf16 one stalls while an fp32 one stays exact or nearly so.
#include <fmt/format.h>

#include "kgate/inputs.hpp"

namespace kgate {

std::vector<HostArray> accumulation_inputs(const Contract& c, const Bindings& b, Stream stream) {
  for (const AccumulationInput& a : c.accumulation.inputs) {
    bool found = false;
    for (const TensorSpec& t : c.inputs) found = found || t.name == a.input;
    if (!found) throw std::invalid_argument(fmt::format("accumulation input {} is not an input", a.input));
  }
  std::vector<HostArray> out;
  for (const TensorSpec& spec : c.inputs) {
    const Shape shape = spec.resolve(b);
    const Stream s = stream.child(spec.name);
    const AccumulationInput* pattern = nullptr;
    for (const AccumulationInput& a : c.accumulation.inputs)
      if (a.input == spec.name) pattern = &a;
    AccumulationInput fallback;  // no list: every float input constant 1
    if (c.accumulation.inputs.empty() && is_float(spec.dtype) && spec.domain.kind != DomainKind::offsets &&
        spec.domain.kind != DomainKind::integer)
      pattern = &fallback;
    if (!pattern) {
      out.push_back(generate_input(spec, shape, b, s, Distribution::contract));
      continue;
    }
    HostArray a(spec.dtype, shape);
    for (std::int64_t i = 0; i < a.numel(); ++i) {
      const double v = pattern->pattern == AccumulationInput::Pattern::constant
                           ? pattern->value
                           : pattern->value * (0.5 + 0.5 * s.uniform(static_cast<std::uint64_t>(i)));
      a.set(i, v);
    }
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace kgate
