// kgate/structure.hpp: what every draw of an input source has in common, so perturbations can keep it.
//
// A source guarantees more than dtypes and shapes: a triangular matrix has zeros in the same places in every
// draw, a covariance is symmetric, a variance is non-negative, class labels stored as floats are integers.
// A gate that perturbs inputs (injects NaN/Inf, scales magnitudes, plants zeros, mixes two draws) and finds a
// failure only on inputs outside that structure has found a failure outside the operator's domain: it labels
// the finding out_of_domain (report.hpp), and such findings never count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kgate/tensor.hpp"

namespace kgate {

enum class SignStructure { any, nonnegative, positive, nonpositive, negative };

struct InputStructure {
  bool is_float = false;               // only float inputs are inferred (and perturbed)
  std::vector<std::uint8_t> zeros;     // one byte per element: zero in every draw (empty: no structural zeros)
  std::int64_t zero_count = 0;
  bool symmetric = false;              // last two dims square (>= 2) and x == x^T in every draw
  SignStructure sign = SignStructure::any;
  bool integral = false;               // every value an integer in every draw (not all zero)
};

// Infers the structure of one input from several draws of it at one shape (at least two; more is safer).
// Structural zeros: the set of zero positions is identical and non-empty in every draw (chance zeros of a
// discrete distribution differ from draw to draw).
InputStructure infer_structure(const std::vector<const HostArray*>& draws);

// Why `a` leaves the structure s, or empty. Non-finite values are judged where they can be: any non-zero
// value (NaN and Inf included) at a structural zero, symmetric partners with different bits, +Inf where the
// sign is non-positive and -Inf where it is non-negative; NaN carries no sign and no integrality.
std::string structure_violation(const InputStructure& s, const HostArray& a);

// "structural zeros at 2016 positions, symmetric, non-negative, integral" ("none" if nothing).
std::string describe(const InputStructure& s);

}  // namespace kgate
