// Reading and writing the elements of a DLPack tensor on the CPU, for glr's kgate entry points.
//
// Conversions are exact where the value fits and round to nearest, ties to even, in one step otherwise
// (bf16 and f16 from double, never through float), with IEEE overflow to Inf; NaN stays NaN.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>

namespace glr::kgate_export {

enum class Elem : std::uint8_t { f64, f32, f16, bf16, i32, i64 };

// The element type of t, or throws glr::InvalidArgument naming `name`.
Elem elem_of(const DLTensor& t, const std::string& name);
bool is_float(Elem e);
const char* name_of(Elem e);

double load(const void* p, Elem e);
void store(double x, void* p, Elem e);

// Every element of t in row-major order of its shape (strides honoured), converted to Real.
template <class Real>
std::vector<Real> gather(const DLTensor& t, Elem e);
// Writes values (row-major order of t's shape) into t's elements, converted to e.
template <class Real>
void scatter(const std::vector<Real>& values, const DLTensor& t, Elem e);

}  // namespace glr::kgate_export
