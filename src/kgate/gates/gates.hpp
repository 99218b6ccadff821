// The gates, one factory per file, in DESIGN.md order (registry.cpp lists them).
#pragma once

#include <memory>
#include <optional>

#include "kgate/gate.hpp"

namespace kgate::gates {

std::unique_ptr<Gate> make_oracle_gate();
std::unique_ptr<Gate> make_nan_gate();
std::unique_ptr<Gate> make_inf_gate();
std::unique_ptr<Gate> make_determinism_gate();
std::unique_ptr<Gate> make_shapes_gate();
std::unique_ptr<Gate> make_accumulation_gate();
std::unique_ptr<Gate> make_immutability_gate();
std::unique_ptr<Gate> make_coverage_gate();
std::unique_ptr<Gate> make_bounds_gate();
std::unique_ptr<Gate> make_freshness_gate();
std::unique_ptr<Gate> make_stream_gate();
std::unique_ptr<Gate> make_layout_gate();
std::unique_ptr<Gate> make_baseline_gate();

// A bounds verdict for candidate-owned guard violations seen after the bounds gate ran (verify() calls it
// once every gate ran): FAIL evidence for the first of them, or nullopt if none is new.
std::optional<GateResult> late_candidate_owned_violation(const GateContext& ctx, const GateResult& bounds,
                                                         std::size_t seen_when_bounds_ran);

}  // namespace kgate::gates
