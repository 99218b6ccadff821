// kgate/inputs.hpp: reproducible input sets and the shapes the gates visit.
//
// Every value comes from a kgate::Stream derived from the run's seed by labels, so one printed seed
// reproduces every input of every gate. Values are drawn as doubles and stored in the input's own dtype
// (they are exact there: the oracle sees exactly what the kernel sees).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kgate/contract.hpp"
#include "kgate/rng.hpp"
#include "kgate/tensor.hpp"

namespace kgate {

// How the oracle gate varies values inside each input's domain (integer and offsets inputs never vary).
enum class Distribution {
  contract,  // the domain as declared
  wide,      // magnitudes spread over orders of magnitude (normal: x 2^[-4, 4]; bounded: log-uniform / edges)
  small,     // magnitudes near zero, or near the domain's end closest to zero
  uniform,   // flat over the domain's bulk (normal: mean +- 2 std)
};
inline constexpr Distribution kAllDistributions[] = {Distribution::contract, Distribution::wide, Distribution::small,
                                                     Distribution::uniform};
const char* to_string(Distribution d);

// One input of the contract at shape `shape` (bindings give `offsets` their total).
HostArray generate_input(const TensorSpec& spec, const Shape& shape, const Bindings& b, Stream stream, Distribution d);
// Every input, input i drawn from stream.child(input name). Throws std::invalid_argument naming the input
// when bindings cannot make it (unbound dim, an offsets total that is not a bound dim).
std::vector<HostArray> generate_inputs(const Contract& c, const Bindings& b, Stream stream, Distribution d);

// What can be injected into which input: NaN and +-Inf only into float inputs with nonfinite = true;
// near-max values only where overflow = true as well.
enum class Injection { nan, infinity, near_max };
const char* to_string(Injection k);
bool injectable(const TensorSpec& spec, Injection k);
// Up to `count` distinct flat positions in [0, n): the first, the last, then random ones.
std::vector<std::int64_t> injection_positions(std::int64_t n, Stream s, int count);
// Values for an injection: NaN; +-Inf with random signs; or one value in [max/2, max] of the dtype with the
// given sign (sign 0: random).
std::vector<double> injection_values(Injection k, DType t, std::size_t count, Stream s, int sign = 0);
// "NaN in x at [0, 0], [3, 7]"
std::string describe_injection(const std::string& what, const TensorSpec& spec, const Shape& shape,
                               const std::vector<std::int64_t>& positions);

// The accumulation gate's inputs: listed inputs get their pattern (constant value, or uniform in
// [value/2, value]), other inputs their contract domain; no list means every float input constant 1.
std::vector<HostArray> accumulation_inputs(const Contract& c, const Bindings& b, Stream stream);

// Shapes. Every binding returned is admissible and keeps every tensor under max_case_elements.
// Whether every input and output at b has at most max_case_elements elements.
bool fits_budget(const Contract& c, const Bindings& b);
// Sets dims that must be multiples of `changed` back onto their grid (nominal ratio where possible).
// Returns false when no admissible binding results.
bool repair_bindings(const Contract& c, Bindings& b);
// Values the shapes gate tries for one dim: min (when 0 or 1), 1, small primes, 17, 33, 65, 127, 129,
// nominal and large, scaled onto multiple_of grids, inside [min, max].
std::vector<std::int64_t> sweep_values(const DimSpec& d);
// The shapes gate's list: each dim swept with the others at nominal, then every dim odd at once, then
// every dim at its smallest; duplicates removed, nominal first.
std::vector<Bindings> shape_sweep(const Contract& c);
// A couple of shapes where tail bugs live (odd sizes at or below nominal, and nominal plus one step).
std::vector<Bindings> odd_shapes(const Contract& c);
// The accumulation gate's shape: [accumulation.sizes], else every reduced dim at its large value; other
// dims nominal; shrunk (non-reduced dims first) until it fits the budget.
Bindings accumulation_bindings(const Contract& c);
// The stream gate's shape: nominal, grown by doubling dims in turn (within range, grid and budget) until
// some tensor has at least `min_elements` elements, so that a call lasts long enough for two to overlap.
Bindings concurrency_bindings(const Contract& c, std::int64_t min_elements);
// Values of dim d on its grid below `current`, smallest first, at most `limit` of them (for shrinking).
std::vector<std::int64_t> smaller_values(const DimSpec& d, std::int64_t current, int limit);

}  // namespace kgate
