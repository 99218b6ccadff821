#include "kgate/tensor.hpp"
#include "kgate/compare.hpp"

#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace kgate {

std::string to_string(const Bindings& b) {
  std::string s;
  for (const auto& [k, v] : b) s += fmt::format("{}{}={}", s.empty() ? "" : " ", k, v);
  return s;
}

std::string shape_string(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

std::int64_t numel(const Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  std::int64_t acc = 1;
  for (std::size_t d = s.size(); d-- > 0;) {
    st[d] = acc;
    acc *= s[d];
  }
  return st;
}

Shape unravel(std::int64_t flat, const Shape& s) {
  Shape idx(s.size());
  for (std::size_t d = s.size(); d-- > 0;) {
    const std::int64_t e = s[d] > 0 ? s[d] : 1;
    idx[d] = flat % e;
    flat /= e;
  }
  return idx;
}

std::int64_t ravel(const Shape& idx, const Shape& s) {
  std::int64_t flat = 0;
  for (std::size_t d = 0; d < s.size(); ++d) flat = flat * s[d] + idx[d];
  return flat;
}

bool Layout::contiguous() const { return offset == 0 && strides == contiguous_strides(shape); }

std::int64_t Layout::storage_elements() const {
  if (numel(shape) == 0) return offset;
  std::int64_t last = offset;
  for (std::size_t d = 0; d < shape.size(); ++d) last += (shape[d] - 1) * strides[d];
  return last + 1;
}

Layout Layout::dense(DType t, Shape s) {
  Layout l;
  l.dtype = t;
  l.strides = contiguous_strides(s);
  l.shape = std::move(s);
  return l;
}

HostArray::HostArray(DType t, Shape s) : dtype_(t), shape_(std::move(s)), numel_(kgate::numel(shape_)) {
  for (auto d : shape_)
    if (d < 0) throw std::invalid_argument(fmt::format("negative extent in shape {}", shape_string(shape_)));
  bytes_.assign(static_cast<std::size_t>(numel_) * size_of(t), std::byte{0});
}

std::uint64_t HostArray::bits(std::int64_t flat) const {
  std::uint64_t v = 0;
  std::memcpy(&v, bytes_.data() + flat * size_of(dtype_), size_of(dtype_));
  return v;
}

std::vector<double> HostArray::to_f64() const {
  std::vector<double> out(static_cast<std::size_t>(numel_));
  decode_elements(dtype_, bytes_.data(), numel_, out.data());  // one dtype switch per array, not per element
  return out;
}

HostArray HostArray::from_f64(DType t, Shape s, std::span<const double> values) {
  HostArray a(t, std::move(s));
  if (static_cast<std::int64_t>(values.size()) != a.numel())
    throw std::invalid_argument(fmt::format("from_f64: {} values for shape {}", values.size(), shape_string(a.shape())));
  for (std::int64_t i = 0; i < a.numel(); ++i) a.set(i, values[static_cast<std::size_t>(i)]);
  return a;
}

HostArray HostArray::cast(DType t) const {
  HostArray a(t, shape_);
  if (t == dtype_) {
    a.bytes_ = bytes_;
    return a;
  }
  for (std::int64_t i = 0; i < numel_; ++i) a.set(i, get(i));
  return a;
}

namespace {
template <class F>
void walk(const Layout& l, F&& f) {  // f(flat index, element offset)
  const std::int64_t n = numel(l.shape);
  const std::size_t rank = l.shape.size();
  std::vector<std::int64_t> idx(rank, 0);
  std::int64_t off = l.offset;
  for (std::int64_t k = 0; k < n; ++k) {
    f(k, off);
    for (std::size_t d = rank; d-- > 0;) {
      if (++idx[d] < l.shape[d]) {
        off += l.strides[d];
        break;
      }
      off -= l.strides[d] * (l.shape[d] - 1);
      idx[d] = 0;
    }
  }
}
}  // namespace

void for_each_element(const Layout& l, const std::function<void(std::int64_t, std::int64_t)>& fn) { walk(l, fn); }

HostArray HostArray::gather(std::span<const std::byte> buffer, const Layout& l) {
  HostArray a(l.dtype, l.shape);
  const std::size_t es = size_of(l.dtype);
  if (static_cast<std::size_t>(l.storage_elements()) * es > buffer.size())
    throw std::out_of_range("gather: layout extends past the buffer");
  if (l.strides == contiguous_strides(l.shape)) {
    std::memcpy(a.data(), buffer.data() + l.offset * es, a.nbytes());
    return a;
  }
  walk(l, [&](std::int64_t k, std::int64_t off) { std::memcpy(a.data() + k * es, buffer.data() + off * es, es); });
  return a;
}

void HostArray::scatter(std::span<std::byte> buffer, const Layout& l) const {
  if (l.dtype != dtype_ || l.shape != shape_) throw std::invalid_argument("scatter: layout does not match the array");
  const std::size_t es = size_of(l.dtype);
  if (static_cast<std::size_t>(l.storage_elements()) * es > buffer.size())
    throw std::out_of_range("scatter: layout extends past the buffer");
  if (l.strides == contiguous_strides(l.shape)) {
    std::memcpy(buffer.data() + l.offset * es, data(), nbytes());
    return;
  }
  walk(l, [&](std::int64_t k, std::int64_t off) { std::memcpy(buffer.data() + off * es, data() + k * es, es); });
}

bool HostArray::bitwise_equal(const HostArray& o) const {
  return dtype_ == o.dtype_ && shape_ == o.shape_ && bytes_ == o.bytes_;
}

DLView::DLView(void* first, DLDevice device, const Layout& l) : shape_(l.shape), strides_(l.strides) {
  tensor_.data = first;
  tensor_.device = device;
  tensor_.ndim = static_cast<int>(shape_.size());
  tensor_.dtype = to_dlpack(l.dtype);
  tensor_.shape = shape_.data();
  tensor_.strides = strides_.data();
  tensor_.byte_offset = 0;
}

}  // namespace kgate
