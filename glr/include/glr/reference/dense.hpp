// glr/reference/dense.hpp: the dense row-major arrays the CPU implementations compute in, and the moves
// between them and the caller's strided tensors.
//
// The CPU code gathers every input into a Dense array once and scatters every output once, so the stages
// themselves never see a stride: that keeps each stage as short as the formula it implements.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <numeric>
#include <vector>

namespace glr::reference {

template <class Real>
class Dense {
 public:
  Dense() = default;
  explicit Dense(std::vector<std::int64_t> shape, Real fill = Real(0)) : shape_(std::move(shape)) {
    const std::int64_t n = std::accumulate(shape_.begin(), shape_.end(), std::int64_t{1},
                                           [](std::int64_t a, std::int64_t b) { return a * b; });
    data_.assign(static_cast<std::size_t>(n), fill);
  }

  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::int64_t size() const { return static_cast<std::int64_t>(data_.size()); }
  bool empty() const { return data_.empty(); }
  Real* data() { return data_.data(); }
  const Real* data() const { return data_.data(); }
  std::vector<Real>& values() { return data_; }
  const std::vector<Real>& values() const { return data_; }

  // Pointer to the block that a prefix of the index selects: ptr(b, t, h) of a [B, T, H, K] array is the
  // K-vector of token t, head h.
  template <class... I>
  Real* ptr(I... index) {
    return data_.data() + offset({static_cast<std::int64_t>(index)...});
  }
  template <class... I>
  const Real* ptr(I... index) const {
    return data_.data() + offset({static_cast<std::int64_t>(index)...});
  }
  template <class... I>
  Real& operator()(I... index) {
    return *ptr(index...);
  }
  template <class... I>
  const Real& operator()(I... index) const {
    return *ptr(index...);
  }

 private:
  std::int64_t offset(std::initializer_list<std::int64_t> index) const {
    std::int64_t o = 0;
    std::size_t d = 0;
    for (std::int64_t i : index) o = o * shape_[d++] + i;
    for (; d < shape_.size(); ++d) o *= shape_[d];
    return o;
  }
  std::vector<std::int64_t> shape_;
  std::vector<Real> data_;
};

// Gathers a strided tensor (shape and element strides, outermost first, up to rank 4) into a Dense array
// of type Real, converting each element.
template <class Real, class E>
Dense<Real> gather(const E* src, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides) {
  Dense<Real> out(shape);
  while (shape.size() < 4) {  // iterate as rank 4, leading extent-1 dims added
    shape.insert(shape.begin(), 1);
    strides.insert(strides.begin(), 0);
  }
  Real* dst = out.data();
  for (std::int64_t a = 0; a < shape[0]; ++a)
    for (std::int64_t b = 0; b < shape[1]; ++b)
      for (std::int64_t c = 0; c < shape[2]; ++c)
        for (std::int64_t d = 0; d < shape[3]; ++d)
          *dst++ = static_cast<Real>(src[a * strides[0] + b * strides[1] + c * strides[2] + d * strides[3]]);
  return out;
}

// Writes a Dense array into a strided tensor of the same shape (up to rank 4).
template <class Real, class E>
void scatter(const Dense<Real>& in, E* dst, std::vector<std::int64_t> strides) {
  std::vector<std::int64_t> shape = in.shape();
  while (shape.size() < 4) {
    shape.insert(shape.begin(), 1);
    strides.insert(strides.begin(), 0);
  }
  const Real* src = in.data();
  for (std::int64_t a = 0; a < shape[0]; ++a)
    for (std::int64_t b = 0; b < shape[1]; ++b)
      for (std::int64_t c = 0; c < shape[2]; ++c)
        for (std::int64_t d = 0; d < shape[3]; ++d)
          dst[a * strides[0] + b * strides[1] + c * strides[2] + d * strides[3]] = static_cast<E>(*src++);
}

// x rounded to the nearest bfloat16 (8 significant bits, float's exponent range), ties to even, in one
// step from double so no double rounding through float can occur. Subnormals, signed zero, Inf and NaN
// behave as IEEE 754 says; a value at or past the midpoint between the largest bf16 and 2^128 becomes Inf.
inline double round_bf16(double x) {
  if (!std::isfinite(x) || x == 0) return x;
  const int e = std::ilogb(x);                // x = m * 2^e with 1 <= |m| < 2
  const int quantum = std::max(e, -126) - 7;  // bf16 subnormals share the quantum 2^-133
  const double r = std::nearbyint(std::ldexp(x, -quantum));  // exact scaling, then ties-to-even rounding
  const double y = std::ldexp(r, quantum);
  if (std::fabs(y) >= 0x1p128) return std::copysign(std::numeric_limits<double>::infinity(), x);
  return y;  // (double has the range bf16 lacks, so the overflow to Inf is explicit)
}

}  // namespace glr::reference
