// tests/glrcuda/shapes.hpp: the shapes every CUDA-path test runs, and the error bounds against the oracle.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "case.hpp"

namespace glr::cudatest {

// Small enough for the host emulation, covering every feature issue 5 names: T not a multiple of 64,
// T = 1, packed batches with odd lengths and an empty sequence, HV = 2H, with and without states, both
// head dims (and the mixed K != V cases the kernels also compile).
inline std::vector<Shape> emulation_shapes() {
  return {
      {"T100_states", 2, 100, 1, 1, 64, 64, {}, true},
      {"T1", 3, 1, 1, 2, 64, 64, {}, true},
      {"varlen_odd_empty", 1, 150, 1, 2, 64, 128, {0, 7, 7, 71, 72, 150}, true},
      {"gva_HV2H_no_states", 1, 70, 2, 4, 128, 64, {}, false},
      {"K128_T130", 1, 130, 1, 1, 128, 128, {}, true},
  };
}

// Larger shapes for the GPU test (the emulation of these takes too long to be a unit test).
inline std::vector<Shape> gpu_shapes() {
  std::vector<Shape> s = emulation_shapes();
  s.push_back({"T600_HV2H_K128", 1, 600, 1, 2, 128, 128, {}, true});
  s.push_back({"varlen_many_K64", 1, 1337, 1, 2, 64, 64, {0, 1, 65, 65, 200, 777, 778, 1337}, true});
  s.push_back({"varlen_empty_last_K128", 1, 515, 1, 2, 128, 128, {0, 64, 128, 515, 515}, false});
  return s;
}

// The error bound of one output against the float64 oracle. The oracle runs on exactly the values the
// kernels read (inputs are drawn in their dtypes), so two sources remain:
//   * the final rounding of the output to its dtype: |round(x) - x| <= u |x| per element, so at most u
//     normwise (u = 2^-8 for bf16, 2^-11 for fp16, 2^-24 for fp32). Measured: about 0.42 u, the RMS of a
//     uniform relative rounding error;
//   * fp32 arithmetic in every stage (dot products of length <= 128, a triangular solve of order 64, the
//     state recurrence along the sequence). The emulation, with outputs kept in fp32, measures 3e-8 to
//     5e-7 on the token outputs and states and up to 5e-6 on dg and dbeta, which are sums with
//     cancellation (a per-token dg adds dG over the rest of its chunk, a per-head dg over every token).
//     Allowed: 1e-4 and 1e-3, 200x what was measured, to cover longer sequences; a real defect (a wrong
//     index, a missing term) shows as an error of order 1, far above either.
//
// The sm90 tensor-core forward (cuda::ForwardPath::sm90, taken for bf16 K = V (64, 128) dense calls on an sm_90
// device) rounds the operands of every tensor-core product to bf16 (T, the state's copy, V_new, P, ...), so
// its o and ht carry several bf16 roundings: the bound of bench/glr/sm90_fwd_check.cu, 8 u with u = 2^-9
// (about six roundings on any path to o, each perturbing it by at most u normwise; the delta rule with
// |k| = 1, 0 < beta < 1, g <= 0 does not amplify them). Measured on the host emulator: 1.3e-3 to 5.5e-3.
inline double error_bound(const std::string& output, DType out_dtype,
                          cuda::ForwardPath path = cuda::ForwardPath::blocks) {
  if (path == cuda::ForwardPath::sm90 && (output == "o" || output == "ht")) return 8 * std::ldexp(1.0, -9);
  const double fp32 = (output == "dg" || output == "dbeta") ? 1e-3 : 1e-4;
  return unit_roundoff(out_dtype) + fp32;
}

// The sm90 tensor-core backward (cuda::BackwardPath::sm90: every member, bf16, K = V = 64 or 128, HV a multiple
// of H, dense or packed; without the delta rule the same bounds, fewer terms) rounds every tensor-core operand to bf16 (T, h, dh', V_new, dX, dV_new, X, P, P^T, dA, E, the
// scaled dO and dX) and dq, dk, dv on output: the bound of bench/glr/sm90_bwd_notes.md and sm90_bwd_check.cu,
// 8 u (u = 2^-9) normwise for dq, dk, dv, dbeta, dh0 (about ten roundings on the longest path, adding in
// quadrature, the recurrence with |k| = 1, 0 < beta < 1, g <= 0 not amplifying them) and 16 u for dg (a reverse
// cumulative sum of terms that largely cancel). Measured on the host emulator: 1.5 u to 3 u (dg up to 7 u at T
// 1000); on the H200 through the standalone check, 27 cases within these bounds.
// bf16 dg, dbeta (bf16 g, beta): one rounding (u) more.
inline double error_bound(const std::string& output, DType out_dtype, cuda::BackwardPath path) {
  if (path == cuda::BackwardPath::sm90)
    return ((output == "dg" ? 16 : 8) + (out_dtype == DType::bf16 && (output == "dg" || output == "dbeta") ? 1 : 0)) *
           std::ldexp(1.0, -9);
  return error_bound(output, out_dtype);
}

}  // namespace glr::cudatest
