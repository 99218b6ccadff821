// kgate/compare.hpp: the comparison core every gate judges with.
//
// Type-erased on purpose: arrays are decoded to double in blocks through one switch on the dtype, so this
// compiles once and a hot loop never calls through a std::function per element. Three kinds of judgement:
// bitwise equality, the non-finite pattern (NaN/Inf where the oracle says), and error against a per-element
// bound. Evidence strings name dtypes, print raw bits where bits matter, and show the neighbourhood of the
// first offending element.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "kgate/contract.hpp"
#include "kgate/dtype.hpp"
#include "kgate/tensor.hpp"

namespace kgate {

// Decodes n elements of type t at src (dense) into dst.
void decode_elements(DType t, const std::byte* src, std::int64_t n, double* dst);

// What a comparison judges against: the oracle's f64 values, the same values rounded to the output dtype
// (what a perfect kernel returns), and the root mean square over the finite oracle values.
struct Reference {
  DType dtype = DType::f32;     // the output's dtype
  Shape shape;
  std::vector<double> exact;    // the oracle, f64
  std::vector<double> rounded;  // round_to(exact, dtype)
  double rms = 0.0;
  // The largest finite |exact|, computed once by make_reference (the reference term of every comparison
  // against this oracle needs it); < 0 in a Reference built otherwise, where it is computed when asked.
  double max_abs = -1.0;
};
// The largest finite |exact| of a reference (0 if none is finite).
double largest_finite_magnitude(const Reference& ref);
// oracle_output holds f64 values (integer outputs in their own dtype); output_dtype is the kernel's.
Reference make_reference(const HostArray& oracle_output, DType output_dtype);

// bound_i = scale * max(rel * |exact_i| + abs_rms * rms + abs, ref_term).
struct Tolerance {
  double rel = 0.0;
  double abs_rms = 0.0;
  double abs = 0.0;
  double scale = 1.0;
  // The reference-error term, where the oracle has a working-precision reference run: K_REF * e_ref + the
  // floor (reference_term below). 0 without one.
  double ref_term = 0.0;
  // The least magnitude the abs_rms term scales with. An output of a handful of elements can cancel to
  // almost nothing, and its own rms then says nothing about the size of the terms that cancelled; the
  // gates set this from the same output at the nominal shape for such outputs.
  double rms_floor = 0.0;
  double bound(double exact, double rms) const {
    const double analytic = rel * (exact < 0 ? -exact : exact) + abs_rms * (rms > rms_floor ? rms : rms_floor) + abs;
    return scale * (analytic > ref_term ? analytic : ref_term);
  }
};
std::string describe(const Tolerance& t);

// The default bound of DESIGN.md: rel = 4 u_d, abs_rms = 8 u_w sqrt(N), abs = the smallest normal of d,
// where d is the output dtype, w the working precision and N the reduction size (product of the output's
// `reduced` dims, 1 if none). The contract's rtol, atol_rms, atol and tolerance_scale replace the
// corresponding terms; verify_scale multiplies everything.
Tolerance default_tolerance(const TensorSpec& output, DType working, std::int64_t reduction_size, double verify_scale);
// The accumulation gate's bound: the rigorous bound for a sum of N positive terms, gamma_{N+4} |ref| in the
// working precision (the +4 covers the rounding of each term, e.g. an exp), plus four ulps of the output
// dtype and its smallest normal. Returns rel = +Inf when (N+4) u_w >= 1: no rigorous bound exists.
// An output whose terms' operands are rounded (TensorSpec::operands: r roundings at u_op each) adds them:
// gamma_r(u_op) + gamma_{N+4}(u_w) + gamma_r(u_op) gamma_{N+4}(u_w), the bound of
// (1 + u_op)^r (1 + u_w)^{N+4} - 1 (docs/contracts.md, `operands`); r = 0 is the plain bound.
Tolerance accumulation_tolerance(DType output, DType working, std::int64_t reduction_size, double verify_scale,
                                 DType operands = DType::f32, int operand_roundings = 0);

// The reference-error term of the bound (docs/report.md, "Bounds"): K_REF * e_ref + FLOOR_ULPS * u_d *
// max|oracle|, where e_ref is the largest |run - oracle| over elements where both are finite, u_d the output
// dtype's unit roundoff and max|oracle| over the finite oracle values.
inline constexpr double kRefFactor = 10.0;   // K_REF
inline constexpr double kRefFloorUlps = 16.0;
// The largest |run - exact| over elements where both are finite (0 if none); run any dtype, same shape.
double reference_error(const HostArray& run, const Reference& ref);
// The same over a run output already decoded to double (callers that need the values anyway decode once).
double reference_error(std::span<const double> run_values, const Reference& ref);
double reference_term(double e_ref, const Reference& ref);

// The product of the dims the output names in `reduced` (1 if none).
std::int64_t reduction_size(const TensorSpec& output, const Bindings& b);

enum class Mismatch {
  none,
  bits,                  // bitwise comparison: the bits differ
  value,                 // finite, but the error exceeds the bound
  nan_masked,            // the oracle gives NaN, the kernel does not
  inf_mismatch,          // the oracle gives +-Inf (or overflows past 2x max), the kernel gives something else
  unexpected_nonfinite,  // the oracle is finite, the kernel is not (outside any allowed spread)
  indeterminate,         // the oracle is NaN under an injected Inf (Inf - Inf, 0 * Inf), the kernel is finite
  shape,                 // the arrays do not even have the same dtype or shape
  spread,                // nan mode: the oracle is finite, the kernel is not (outside any allowed spread, not
                         // shared by the working-precision reference run): the kernel's NaN reaches further
};
inline constexpr std::size_t kMismatchKinds = 9;
// The kinds that make a kernel a violation, never broken beyond tolerance (DESIGN.md section 3: NaN outside
// the allowed spread is "a separate, reported violation"; a finite value where the operator has no value is
// defensible as a limit): indeterminate and spread. Every other kind is tolerance-free where a tolerance-free
// gate finds it. The one definition: a comparison reports the most serious kind it found (any other kind
// outranks these), kgate::violation_only (report.hpp) reads findings by it, and so run_gate and the
// classification.
bool violation_only(Mismatch m);

// Why an element was not held against the kernel (each comparison counts them; every summary says them).
enum class Excuse {
  spread,               // a non-finite value the contract's spread rule allows
  near_overflow,        // inf mode: the oracle lies between max/2 and 2 max of the dtype (rounding order decides)
  order_nonfinite,      // inf mode: the oracle is NaN (indeterminate) and the kernel non-finite too (Inf for NaN)
  reference_nonfinite,  // the working-precision reference run is non-finite there too, in the same class
  structural_zero,      // the oracle's NaN arrives only through a structural zero of the source (0 * NaN,
                        // 0 * Inf): the operator on the source's domain does not depend on the planted value
  inf_sign_undetermined,  // inf mode: the kernel gives the other Inf where the oracle's own sign flips (or turns
                          // NaN or 0) with the finite inputs moved within the output's relative tolerance
};
inline constexpr std::size_t kExcuseKinds = 6;
const char* to_string(Excuse e);
const char* to_string(Mismatch m);

struct Comparison {
  bool ok = true;
  // The most serious kind found (a violation_only kind only when no other is present), and the flat index
  // (row-major) of the first element of that kind: a spread NaN found first never hides a masked one.
  Mismatch kind = Mismatch::none;
  std::int64_t first = -1;
  std::int64_t bad = 0;            // offending elements, of every kind
  std::int64_t by_kind[kMismatchKinds] = {};  // offending elements by Mismatch (shape mismatches count none)
  std::int64_t judged = 0;         // elements judged
  // Worst err_i / bound_i over finite elements (tolerance comparisons; +Inf for a non-finite mismatch).
  double max_ratio = 0.0;
  std::int64_t worst = -1;
  std::int64_t excused[kExcuseKinds] = {};  // by Excuse
};

// Bitwise equality, element by element (both arrays of one dtype and shape).
Comparison compare_bitwise(const HostArray& expected, const HostArray& got);
// Error against the bound. Non-finite values follow the oracle: NaN must stay NaN, an oracle value that
// rounds to +-Inf must be the same Inf, a finite oracle value must come out finite. Integer and bool
// outputs must be exact.
// `reference_nonfinite` (empty, or one byte per element): elements where the working-precision reference run
// is non-finite while the oracle is finite; a kernel value of the same class there (NaN for NaN, the same
// Inf) is excused (Excuse::reference_nonfinite): the operator overflows at the promised precision.
Comparison compare_within(const HostArray& got, const Reference& ref, const Tolerance& tol,
                          std::span<const std::uint8_t> reference_nonfinite = {});
// torch.allclose(got, ref, rtol, atol, equal_nan=False) against the oracle's f64 values: the field's test.
Comparison compare_allclose(const HostArray& got, const Reference& ref, double rtol, double atol);

// The non-finite pattern check of the nan and inf gates (tolerance-free). `allowed` (empty, or one byte per
// element) marks elements where the contract's spread rule lets a non-finite value appear.
//   nan mode: oracle NaN -> must be NaN; a non-finite value where the oracle is finite and not allowed.
//   inf mode: oracle NaN (an indeterminate form: Inf - Inf, 0 * Inf) -> must be non-finite (NaN, or an Inf
//             that another evaluation order gives: excused); a finite value is Mismatch::indeterminate; oracle +-Inf or
//             |oracle| > 2 max_d -> must be that Inf (NaN only if inf_may_become_nan); oracle finite with
//             |oracle| < max_d / 2 and not allowed -> must be finite; anything else is unjudged.
// `structural` (empty, or one byte per element): elements where the oracle's NaN comes only from a planted
// value meeting a structural zero of the source (gates/nonfinite.cpp finds them); a finite kernel value there
// is excused (Excuse::structural_zero) instead of nan_masked or indeterminate.
// `sign_free` (empty, or one byte per element): elements where the oracle is +-Inf but its sign is not
// determined within the output's tolerance (gates/nonfinite.cpp finds them); the other Inf there is excused
// (Excuse::inf_sign_undetermined) instead of inf_mismatch. Anything else (finite, NaN unless allowed) is not.
// `reference_nonfinite` (empty, or one byte per element, as compare_within takes it): where the oracle is
// finite and the kernel is not, a kernel value of the class the working-precision reference run has there
// (1 NaN, 2 +Inf, 3 -Inf) is excused (Excuse::reference_nonfinite): the operator overflows at the promised
// precision (x * x / sum(x * x) in fp32 with x near max), which is no defect of the kernel.
// In nan mode a non-finite value where the oracle is finite, not allowed and not excused is Mismatch::spread
// (a violation); in inf mode it is Mismatch::unexpected_nonfinite (tolerance-free, DESIGN.md's inf gate).
enum class NonfiniteMode { nan, inf };
Comparison check_nonfinite(const HostArray& got, const Reference& ref, std::span<const std::uint8_t> allowed,
                           NonfiniteMode mode, bool inf_may_become_nan,
                           std::span<const std::uint8_t> structural = {}, std::span<const std::uint8_t> sign_free = {},
                           std::span<const std::uint8_t> reference_nonfinite = {});

// Elements where the oracle's value seeds the spread: non-finite after rounding, or (inf mode) |exact| >=
// max_d / 2, i.e. anything a correct kernel might legitimately return as non-finite.
std::vector<std::uint8_t> nonfinite_seeds(const Reference& ref, NonfiniteMode mode);
// Widens `seeds` by the contract's spread rule for one output (see SpreadRule): along the output's axis
// named spread.dim, to whole blocks and onward in the rule's direction, never across a segment boundary
// of the offsets input spread.segments. Outputs without that axis, or an exact rule, keep `seeds`.
std::vector<std::uint8_t> allowed_spread(const Contract& c, const TensorSpec& output, const Shape& shape,
                                         std::vector<std::uint8_t> seeds, const std::vector<HostArray>& inputs);

// Evidence formatting.
std::string format_value(double v, DType t);           // shortest text that reads back as the same t
std::string format_bits(std::uint64_t bits, DType t);  // "0x7fc00000"
std::string format_element(const HostArray& a, std::int64_t flat, bool with_bits);
std::string format_index(const Shape& index);          // "[2, 7]"
// Rows of `index  expected  got` around flat index `at` along the last axis (radius elements each side).
// expected may be null (then only got is shown); with_bits adds raw bits.
std::string neighbourhood(const HostArray& got, const Reference* expected, const HostArray* expected_bits,
                          std::int64_t at, int radius, bool with_bits);

}  // namespace kgate
