// Argument checks shared by every glr op kernel (see problem.hpp).
#include "problem.hpp"

#include <sstream>
#include <vector>

namespace glr::torch_ops {
namespace {

std::string shape_str(at::IntArrayRef s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "]";
  return o.str();
}

bool is_float(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16;
}

void expect_shape(const char* op, const char* name, const at::Tensor& t, std::vector<std::int64_t> want,
                  const char* dims) {
  TORCH_CHECK(t.sizes() == at::IntArrayRef(want), op, ": ", name, ": expected shape ", shape_str(want), " (",
              dims, "), got ", shape_str(t.sizes()));
}

void expect_device(const char* op, const char* name, const at::Tensor& t, const at::Tensor& q) {
  TORCH_CHECK(t.device() == q.device(), op, ": ", name, ": on ", t.device(), " but q is on ", q.device());
}

void expect_absent(const char* op, const char* name, const OptTensor& t, const char* why) {
  TORCH_CHECK(!t.has_value() || !t->defined(), op, ": ", name, ": given, but ", why);
}

bool present(const OptTensor& t) { return t.has_value() && t->defined(); }

}  // namespace

Gate gate_of(std::int64_t code, const char* op) {
  TORCH_CHECK(code >= 0 && code <= 2, op, ": gate: unknown code ", code, " (0 none, 1 per token, 2 per head)");
  return static_cast<Gate>(code);
}

at::ScalarType state_dtype(const at::Tensor& q) {
  return q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

Params describe(const Call& c) {
  const char* op = c.op;
  TORCH_CHECK(c.q.dim() == 4, op, ": q: expected 4 dimensions [B, T, H, K], got ", c.q.dim());
  TORCH_CHECK(c.v.dim() == 4, op, ": v: expected 4 dimensions [B, T, HV, V], got ", c.v.dim());
  TORCH_CHECK(is_float(c.q.scalar_type()), op, ": q: dtype ", c.q.scalar_type(),
              " is not one of float32, float64, float16, bfloat16");
  TORCH_CHECK(c.k.scalar_type() == c.q.scalar_type(), op, ": k: dtype ", c.k.scalar_type(),
              " differs from q's ", c.q.scalar_type());
  TORCH_CHECK(c.v.scalar_type() == c.q.scalar_type(), op, ": v: dtype ", c.v.scalar_type(),
              " differs from q's ", c.q.scalar_type());
  expect_device(op, "k", c.k, c.q);
  expect_device(op, "v", c.v, c.q);

  Params p;
  p.B = c.q.size(0);
  p.T = c.q.size(1);
  p.H = c.q.size(2);
  p.K = c.q.size(3);
  p.HV = c.v.size(2);
  p.V = c.v.size(3);
  p.scale = c.scale;
  p.delta = c.delta;
  p.gate = gate_of(c.gate, op);
  expect_shape(op, "k", c.k, {p.B, p.T, p.H, p.K}, "like q: B, T, H, K");
  TORCH_CHECK(c.v.size(0) == p.B && c.v.size(1) == p.T, op, ": v: expected shape [", p.B, ", ", p.T,
              ", HV, V] (B and T of q), got ", shape_str(c.v.sizes()));
  TORCH_CHECK(p.H >= 1 && p.HV >= 1 && p.HV % p.H == 0, op, ": v: value heads HV = ", p.HV,
              " must be a positive multiple of the query/key heads H = ", p.H);
  TORCH_CHECK(p.K >= 1 && p.V >= 1, op, ": head dims must be >= 1, got K = ", p.K, ", V = ", p.V);

  if (p.gate == Gate::none) {
    expect_absent(op, "g", c.g, "this member has no gate (gate = 0)");
  } else {
    TORCH_CHECK(present(c.g), op, ": g: missing (gate = ", c.gate, " needs the log-decay)");
    TORCH_CHECK(is_float(c.g->scalar_type()), op, ": g: dtype ", c.g->scalar_type(), " is not floating point");
    expect_device(op, "g", *c.g, c.q);
    if (p.gate == Gate::per_token)
      expect_shape(op, "g", *c.g, {p.B, p.T, p.HV}, "B, T, HV: one log-decay per token and value head");
    else
      expect_shape(op, "g", *c.g, {p.HV}, "HV: one log-decay per value head");
  }
  if (!p.delta) {
    expect_absent(op, "beta", c.beta, "this member has no delta term");
  } else {
    TORCH_CHECK(present(c.beta), op, ": beta: missing (the delta rule needs the write strength)");
    TORCH_CHECK(is_float(c.beta->scalar_type()), op, ": beta: dtype ", c.beta->scalar_type(),
                " is not floating point");
    expect_device(op, "beta", *c.beta, c.q);
    expect_shape(op, "beta", *c.beta, {p.B, p.T, p.HV}, "B, T, HV");
  }

  std::int64_t N = p.B;
  if (present(c.cu_seqlens)) {
    const at::Tensor& cs = *c.cu_seqlens;
    TORCH_CHECK(cs.scalar_type() == at::kLong || cs.scalar_type() == at::kInt, op,
                ": cu_seqlens: dtype ", cs.scalar_type(), " is not int64 or int32");
    TORCH_CHECK(cs.dim() == 1 && cs.size(0) >= 2, op,
                ": cu_seqlens: expected 1 dimension with N + 1 >= 2 offsets, got shape ", shape_str(cs.sizes()));
    expect_device(op, "cu_seqlens", cs, c.q);
    TORCH_CHECK(p.B == 1, op, ": cu_seqlens: packed sequences need B = 1 (q is ", shape_str(c.q.sizes()), ")");
    N = cs.size(0) - 1;
  }
  p.initial_state = present(c.h0);
  if (p.initial_state) {
    TORCH_CHECK(c.h0->scalar_type() == state_dtype(c.q), op, ": h0: dtype ", c.h0->scalar_type(),
                " must be ", state_dtype(c.q), " (states are kept in fp32; fp64 for fp64 inputs)");
    expect_device(op, "h0", *c.h0, c.q);
    expect_shape(op, "h0", *c.h0, {N, p.HV, p.K, p.V}, "N, HV, K, V: N sequences");
  }
  return p;
}

void check_backward(const Call& c, const Params& p, const at::Tensor& dout, const OptTensor& dht) {
  TORCH_CHECK(dout.scalar_type() == c.q.scalar_type(), c.op, ": dout: dtype ", dout.scalar_type(),
              " differs from q's ", c.q.scalar_type());
  expect_device(c.op, "dout", dout, c.q);
  expect_shape(c.op, "dout", dout, {p.B, p.T, p.HV, p.V}, "like o: B, T, HV, V");
  if (present(dht)) {
    const std::int64_t N = present(c.cu_seqlens) ? c.cu_seqlens->size(0) - 1 : p.B;
    TORCH_CHECK(dht->scalar_type() == state_dtype(c.q), c.op, ": dht: dtype ", dht->scalar_type(), " must be ",
                state_dtype(c.q));
    expect_device(c.op, "dht", *dht, c.q);
    expect_shape(c.op, "dht", *dht, {N, p.HV, p.K, p.V}, "like ht: N, HV, K, V");
  }
}

TokenStrides token_strides(const at::Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2), t.stride(3)}; }

ScalarStrides scalar_strides(const at::Tensor& t, Gate gate) {
  if (gate == Gate::per_head) return {0, 0, t.stride(0)};
  return {t.stride(0), t.stride(1), t.stride(2)};
}

StateStrides state_strides(const at::Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2), t.stride(3)}; }

}  // namespace glr::torch_ops
