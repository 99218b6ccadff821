// The engine tests' kit: three small contracts built in code (an elementwise op, a row softmax, a matmul),
// their float64 oracles, and correct kernels written against the C ABI. Broken kernels live next to the
// test that catches them.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kgate/abi.h"
#include "kgate/contract.hpp"
#include "kgate/oracle.hpp"
#include "kgate/report.hpp"
#include "kgate/targets.hpp"
#include "kgate/verify.hpp"

namespace kgate::test {

// ---- A Target that passes every operation to another (fill keeps Target's default, which writes through
// write()): a test derives from it and overrides only what its defect or fault changes (call, reset, ...).
class ForwardingTarget : public Target {
 public:
  explicit ForwardingTarget(std::unique_ptr<Target> t) : t_(std::move(t)) {}
  std::string describe() const override { return t_->describe(); }
  DLDeviceType device() const override { return t_->device(); }
  BufferId alloc(std::size_t bytes) override { return t_->alloc(bytes); }
  void release(BufferId id) override { t_->release(id); }
  void write(BufferId id, std::size_t offset, std::span<const std::byte> data) override { t_->write(id, offset, data); }
  std::vector<std::byte> read(BufferId id, std::size_t offset, std::size_t bytes) override {
    return t_->read(id, offset, bytes);
  }
  std::vector<GuardViolation> check_guards(BufferId id) override { return t_->check_guards(id); }
  CallResult call(const CallRequest& req) override { return t_->call(req); }
  void reset() override { t_->reset(); }
  bool healthy() const override { return t_->healthy(); }

 protected:
  std::unique_ptr<Target> t_;
};

// ---- Element access through a DLTensor, honouring strides (what a correct kernel does).
inline DType dtype_of(const DLTensor& t) { return *from_dlpack(t.dtype); }
inline std::int64_t count(const DLTensor& t) {
  std::int64_t n = 1;
  for (int d = 0; d < t.ndim; ++d) n *= t.shape[d];
  return n;
}
// Element offset (in elements) of row-major flat index `flat`.
inline std::int64_t offset_of(const DLTensor& t, std::int64_t flat) {
  std::int64_t off = 0;
  for (int d = t.ndim; d-- > 0;) {
    off += (flat % t.shape[d]) * t.strides[d];
    flat /= t.shape[d];
  }
  return off;
}
inline double load(const DLTensor& t, std::int64_t flat) {
  const auto* p = static_cast<const std::byte*>(t.data);
  return load_f64(p + offset_of(t, flat) * static_cast<std::int64_t>(size_of(dtype_of(t))), dtype_of(t));
}
inline void store(DLTensor& t, std::int64_t flat, double v) {
  auto* p = static_cast<std::byte*>(t.data);
  store_f64(v, p + offset_of(t, flat) * static_cast<std::int64_t>(size_of(dtype_of(t))), dtype_of(t));
}
// Element (i, j) of a 2-D tensor, by its strides.
inline double load2(const DLTensor& t, std::int64_t i, std::int64_t j) {
  const auto* p = static_cast<const std::byte*>(t.data);
  const DType d = dtype_of(t);
  return load_f64(p + (i * t.strides[0] + j * t.strides[1]) * static_cast<std::int64_t>(size_of(d)), d);
}
inline void store2(DLTensor& t, std::int64_t i, std::int64_t j, double v) {
  auto* p = static_cast<std::byte*>(t.data);
  const DType d = dtype_of(t);
  store_f64(v, p + (i * t.strides[0] + j * t.strides[1]) * static_cast<std::int64_t>(size_of(d)), d);
}
inline const DLTensor& in(const kgate_call& c, int i) { return c.inputs[i]; }
inline DLTensor& out(const kgate_call& c, int i) { return c.outputs[i]; }

// ---- Contracts.
DimSpec dim(const std::string& name, std::int64_t min, std::int64_t max, std::int64_t nominal, std::int64_t multiple_of = 1);
TensorSpec tensor(const std::string& name, DType t, std::vector<std::string> shape);

// z = relu(x) * y over [M, N], f32; both inputs strided.
Contract elementwise_contract();
// y = softmax(x) along N over [R, N], bf16 in and out, f32 working precision; N reduced.
Contract softmax_contract();
// c = a @ b, a [M, K] and b [K, N] in f16, c [M, N] in f32, f32 accumulation; K reduced.
Contract matmul_contract();

std::unique_ptr<Oracle> elementwise_oracle();
std::unique_ptr<Oracle> softmax_oracle();
std::unique_ptr<Oracle> matmul_oracle();

// ---- Correct kernels (f32 arithmetic throughout, honouring strides and offsets).
std::int32_t elementwise_kernel(const kgate_call& c);
std::int32_t softmax_kernel(const kgate_call& c);
std::int32_t matmul_kernel(const kgate_call& c);

// relu as IEEE says: a NaN stays NaN (std::max would too, fmaxf would not).
inline float relu(float x) { return x > 0 || std::isnan(x) ? x : 0.0f; }

// ---- Running.
struct Subject {
  Contract contract;
  std::unique_ptr<Oracle> oracle;
};
Subject elementwise();
Subject softmax();
Subject matmul();

Report run(const Subject& s, EntryFn kernel, std::uint64_t seed, std::vector<std::string> gates = {}, bool shrink = true);
const GateResult* find(const Report& r, const std::string& gate);
// "oracle=PASS nan=FAIL ..." for failure messages.
std::string verdicts(const Report& r);
// The gates whose verdict is FAIL, CRASH or TIMEOUT (baseline excluded).
std::vector<std::string> failing(const Report& r);

// The stream gate's SKIP when its two calls never ran at once (a loaded machine, a call of microseconds):
// the honest verdict of an environment, not of the kernel, so tests of correct kernels accept it where
// they expect PASS. The gate's power to fail is proven by the broken controls, not here.
bool concurrency_unexercised(const GateResult& g);

}  // namespace kgate::test
