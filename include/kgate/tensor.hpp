// kgate/tensor.hpp: host arrays, strided layouts and DLPack views over them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>

#include "kgate/dtype.hpp"

namespace kgate {

using Shape = std::vector<std::int64_t>;

// Values of a contract's symbolic dimensions, by name; ordered so printing and hashing are stable.
using Bindings = std::map<std::string, std::int64_t>;
std::string to_string(const Bindings& b);  // "M=3 N=17"
std::string shape_string(const Shape& s);  // "[3, 17]"

std::int64_t numel(const Shape& s);
Shape contiguous_strides(const Shape& s);  // row-major, in elements
// Flat (row-major) index -> multi-index, and back.
Shape unravel(std::int64_t flat, const Shape& s);
std::int64_t ravel(const Shape& index, const Shape& s);

// Where the elements of a tensor sit in a buffer: strides in elements, offset of element 0 in elements.
struct Layout {
  DType dtype = DType::f32;
  Shape shape;
  Shape strides;              // same rank as shape
  std::int64_t offset = 0;    // elements from the buffer's start to element 0
  bool contiguous() const;
  // Smallest buffer size in elements that holds every element: offset + 1 + sum (shape-1)*stride.
  std::int64_t storage_elements() const;
  static Layout dense(DType t, Shape s);
};

// Calls fn(flat index, element offset in the buffer) for every element, flat index in row-major order.
void for_each_element(const Layout& layout, const std::function<void(std::int64_t, std::int64_t)>& fn);

// A dense, row-major, owning host array of one dtype. The bytes are the elements exactly as a kernel sees
// them, so bitwise comparisons are comparisons of bytes.
class HostArray {
 public:
  HostArray() = default;
  HostArray(DType t, Shape s);  // zero-filled
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  std::int64_t numel() const { return numel_; }
  std::size_t nbytes() const { return bytes_.size(); }
  std::byte* data() { return bytes_.data(); }
  const std::byte* data() const { return bytes_.data(); }
  std::span<const std::byte> bytes() const { return bytes_; }
  std::span<std::byte> bytes() { return bytes_; }

  double get(std::int64_t flat) const { return load_f64(bytes_.data() + flat * size_of(dtype_), dtype_); }
  void set(std::int64_t flat, double v) { store_f64(v, bytes_.data() + flat * size_of(dtype_), dtype_); }
  // Element i's raw bits, zero-extended (for bitwise evidence).
  std::uint64_t bits(std::int64_t flat) const;

  std::vector<double> to_f64() const;
  static HostArray from_f64(DType t, Shape s, std::span<const double> values);  // rounds each value
  HostArray cast(DType t) const;

  // Copy out of / into a strided layout inside a byte buffer (the layout's dtype must match).
  static HostArray gather(std::span<const std::byte> buffer, const Layout& layout);
  void scatter(std::span<std::byte> buffer, const Layout& layout) const;

  bool bitwise_equal(const HostArray& other) const;

 private:
  DType dtype_ = DType::f32;
  Shape shape_;
  std::int64_t numel_ = 0;
  std::vector<std::byte> bytes_;
};

// A DLTensor plus the shape and stride arrays it points into. Not copyable or movable: the DLTensor holds
// pointers into this object.
class DLView {
 public:
  DLView(void* first_element, DLDevice device, const Layout& layout);
  DLView(const DLView&) = delete;
  DLView& operator=(const DLView&) = delete;
  const DLTensor& tensor() const { return tensor_; }
  DLTensor& tensor() { return tensor_; }

 private:
  Shape shape_, strides_;
  DLTensor tensor_{};
};

}  // namespace kgate
