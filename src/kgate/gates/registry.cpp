// The gate list, explicit rather than self-registering: objects in a static library that nothing references
// are dropped by the linker, and an explicit list also fixes the report's order.
#include "gates/gates.hpp"

namespace kgate {

const std::vector<std::unique_ptr<Gate>>& registered_gates() {
  static const std::vector<std::unique_ptr<Gate>> all = [] {
    std::vector<std::unique_ptr<Gate>> v;
    v.push_back(gates::make_oracle_gate());
    v.push_back(gates::make_nan_gate());
    v.push_back(gates::make_inf_gate());
    v.push_back(gates::make_determinism_gate());
    v.push_back(gates::make_shapes_gate());
    v.push_back(gates::make_accumulation_gate());
    v.push_back(gates::make_immutability_gate());
    v.push_back(gates::make_coverage_gate());
    v.push_back(gates::make_bounds_gate());
    v.push_back(gates::make_freshness_gate());
    v.push_back(gates::make_stream_gate());
    v.push_back(gates::make_layout_gate());
    v.push_back(gates::make_baseline_gate());
    return v;
  }();
  return all;
}

}  // namespace kgate
