#include "abi_call.hpp"

#include <cmath>
#include <cstring>
#include <string>

namespace glr::abi {
namespace {

std::string str(std::int64_t x) { return std::to_string(x); }

double attr(const kgate_call& c, const char* name, bool required, double fallback = 0) {
  for (std::int32_t i = 0; i < c.n_attrs; ++i)
    if (std::strcmp(c.attrs[i].name, name) == 0) return c.attrs[i].value;
  if (required) throw Refused{std::string("attr ") + name + " is missing from the contract"};
  return fallback;
}

int flag(const kgate_call& c, const char* name, int max) {
  const double x = attr(c, name, false, 0);
  if (x != std::floor(x) || x < 0 || x > max)
    throw Refused{std::string("attr ") + name + " = " + std::to_string(x) + " is not an integer in [0, " +
                  str(max) + "]"};
  return static_cast<int>(x);
}

cuda::DType float_dtype(const DLTensor& t, const char* name) {
  if (t.dtype.lanes != 1) throw Refused{std::string(name) + ": vector dtypes are not supported"};
  if (t.dtype.code == kDLBfloat && t.dtype.bits == 16) return cuda::DType::bf16;
  if (t.dtype.code == kDLFloat && t.dtype.bits == 16) return cuda::DType::f16;
  if (t.dtype.code == kDLFloat && t.dtype.bits == 32) return cuda::DType::f32;
  if (t.dtype.code == kDLFloat && t.dtype.bits == 64) return cuda::DType::f64;
  throw Refused{std::string(name) + ": dtype code " + str(t.dtype.code) + " with " + str(t.dtype.bits) +
                " bits is not a float dtype glr takes"};
}

// Hands out the call's tensors in contract order.
class Cursor {
 public:
  Cursor(const DLTensor* list, std::int32_t n, const char* what, DLDeviceType device)
      : list_(list), n_(n), what_(what), device_(device) {}
  const DLTensor& next(const char* name, int ndim) {
    if (i_ >= n_)
      throw Refused{std::string(what_) + ": the contract gives " + str(n_) + " tensors, " + name + " would be #" +
                    str(i_ + 1)};
    const DLTensor& t = list_[i_++];
    if (t.ndim != ndim)
      throw Refused{std::string(name) + ": expected " + str(ndim) + " dims, got " + str(t.ndim)};
    if (t.device.device_type != device_)
      throw Refused{std::string(name) + ": on device type " + str(t.device.device_type) + ", expected " +
                    str(device_)};
    if (t.byte_offset != 0) throw Refused{std::string(name) + ": byte_offset must be 0"};
    if (t.strides == nullptr && t.ndim > 0) throw Refused{std::string(name) + ": strides are NULL"};
    return t;
  }
  void done() const {
    if (i_ != n_) throw Refused{std::string(what_) + ": the contract gives " + str(n_) + " tensors, " + str(i_) +
                                " expected from its attrs"};
  }

 private:
  const DLTensor* list_;
  std::int32_t n_, i_ = 0;
  const char* what_;
  DLDeviceType device_;
};

void expect_dims(const char* name, const DLTensor& t, std::initializer_list<std::int64_t> want) {
  int d = 0;
  for (std::int64_t w : want) {
    if (t.shape[d] != w)
      throw Refused{std::string(name) + ": dim " + str(d) + " is " + str(t.shape[d]) + ", expected " + str(w)};
    ++d;
  }
}

TokenStrides token_strides(const DLTensor& t) { return {t.strides[0], t.strides[1], t.strides[2], t.strides[3]}; }
ScalarStrides scalar_strides(const DLTensor& t) {
  return t.ndim == 1 ? ScalarStrides{0, 0, t.strides[0]} : ScalarStrides{t.strides[0], t.strides[1], t.strides[2]};
}
StateStrides state_strides(const DLTensor& t) { return {t.strides[0], t.strides[1], t.strides[2], t.strides[3]}; }

}  // namespace

void say(const kgate_call& call, const std::string& why) {
  if (!call.message || call.message_capacity == 0) return;
  const std::size_t n = why.size() < call.message_capacity - 1 ? why.size() : call.message_capacity - 1;
  std::memcpy(call.message, why.data(), n);
  call.message[n] = '\0';
}

Call read_call(const kgate_call& kc, bool backward, DLDeviceType device, bool on_host) {
  if (kc.abi_version != KGATE_ABI_VERSION)
    throw Refused{"caller ABI version " + str(kc.abi_version) + ", this library " + str(KGATE_ABI_VERSION)};
  Call c;
  c.backward = backward;
  Params& p = c.params;
  p.delta = flag(kc, "delta", 1) != 0;
  const int gate = flag(kc, "gate", 2);
  p.gate = gate == 0 ? Gate::none : gate == 1 ? Gate::per_token : Gate::per_head;
  p.initial_state = flag(kc, "initial_state", 1) != 0;
  p.final_state = flag(kc, "final_state", 1) != 0;
  const bool varlen = flag(kc, "varlen", 1) != 0;
  p.scale = attr(kc, "scale", true);
  p.chunk = static_cast<std::int64_t>(attr(kc, "chunk", false, static_cast<double>(kDefaultChunk)));

  Cursor in(kc.inputs, kc.n_inputs, "inputs", device), out(kc.outputs, kc.n_outputs, "outputs", device);
  const DLTensor& q = in.next("q", 4);
  p.B = q.shape[0];
  p.T = q.shape[1];
  p.H = q.shape[2];
  p.K = q.shape[3];
  const DLTensor& k = in.next("k", 4);
  expect_dims("k", k, {p.B, p.T, p.H, p.K});
  const DLTensor& v = in.next("v", 4);
  expect_dims("v", v, {p.B, p.T});
  p.HV = v.shape[2];
  p.V = v.shape[3];
  c.q = {&q, float_dtype(q, "q")};
  c.k = {&k, float_dtype(k, "k")};
  c.v = {&v, float_dtype(v, "v")};
  p.strides.q = token_strides(q);
  p.strides.k = token_strides(k);
  p.strides.v = token_strides(v);
  if (p.gate != Gate::none) {
    const DLTensor& g = in.next("g", p.gate == Gate::per_head ? 1 : 3);
    if (p.gate == Gate::per_head)
      expect_dims("g", g, {p.HV});
    else
      expect_dims("g", g, {p.B, p.T, p.HV});
    c.g = {&g, float_dtype(g, "g")};
    p.strides.g = p.strides.dg = scalar_strides(g);
  }
  if (p.delta) {
    const DLTensor& b = in.next("beta", 3);
    expect_dims("beta", b, {p.B, p.T, p.HV});
    c.beta = {&b, float_dtype(b, "beta")};
    p.strides.beta = p.strides.dbeta = scalar_strides(b);
  }
  const DLTensor* h0 = p.initial_state ? &in.next("h0", 4) : nullptr;
  const DLTensor* dout = backward ? &in.next("dout", 4) : nullptr;
  const DLTensor* dht = backward && p.final_state ? &in.next("dht", 4) : nullptr;
  const DLTensor* cu = varlen ? &in.next("cu_seqlens", 1) : nullptr;
  in.done();

  std::int64_t N = p.B;
  if (cu) {
    const bool i64 = cu->dtype.code == kDLInt && cu->dtype.bits == 64 && cu->dtype.lanes == 1;
    const bool i32 = cu->dtype.code == kDLInt && cu->dtype.bits == 32 && cu->dtype.lanes == 1;
    if (!i64 && !i32) throw Refused{"cu_seqlens: must be int32 or int64"};
    if (cu->shape[0] < 2) throw Refused{"cu_seqlens: needs at least 2 offsets"};
    if (cu->strides[0] != 1) throw Refused{"cu_seqlens: must be contiguous"};
    N = cu->shape[0] - 1;
    c.offsets.num_seqs = N;
    if (i64)
      c.offsets.cu_seqlens = static_cast<const std::int64_t*>(cu->data);
    else
      c.offsets.cu_seqlens32 = static_cast<const std::int32_t*>(cu->data);
    if (on_host) {
      p.cu_seqlens.resize(static_cast<std::size_t>(cu->shape[0]));
      for (std::int64_t i = 0; i < cu->shape[0]; ++i)
        p.cu_seqlens[static_cast<std::size_t>(i)] = i64 ? c.offsets.cu_seqlens[i] : c.offsets.cu_seqlens32[i];
    }
  }
  auto state = [&](const DLTensor* t, const char* name, Tensor& into, StateStrides& strides) {
    if (!t) return;
    expect_dims(name, *t, {N, p.HV, p.K, p.V});
    into = {t, float_dtype(*t, name)};
    strides = state_strides(*t);
  };
  state(h0, "h0", c.h0, p.strides.h0);
  state(dht, "dht", c.dht, p.strides.dht);
  if (dout) {
    expect_dims("dout", *dout, {p.B, p.T, p.HV, p.V});
    c.dout = {dout, float_dtype(*dout, "dout")};
    p.strides.dout = token_strides(*dout);
  }

  if (!backward) {
    const DLTensor& o = out.next("o", 4);
    expect_dims("o", o, {p.B, p.T, p.HV, p.V});
    c.o = {&o, float_dtype(o, "o")};
    p.strides.o = token_strides(o);
    if (p.final_state) state(&out.next("ht", 4), "ht", c.ht, p.strides.ht);
  } else {
    const DLTensor& dq = out.next("dq", 4);
    const DLTensor& dk = out.next("dk", 4);
    const DLTensor& dv = out.next("dv", 4);
    expect_dims("dq", dq, {p.B, p.T, p.H, p.K});
    expect_dims("dk", dk, {p.B, p.T, p.H, p.K});
    expect_dims("dv", dv, {p.B, p.T, p.HV, p.V});
    c.dq = {&dq, float_dtype(dq, "dq")};
    c.dk = {&dk, float_dtype(dk, "dk")};
    c.dv = {&dv, float_dtype(dv, "dv")};
    p.strides.dq = token_strides(dq);
    p.strides.dk = token_strides(dk);
    p.strides.dv = token_strides(dv);
    if (p.gate != Gate::none) {
      const DLTensor& dg = out.next("dg", p.gate == Gate::per_head ? 1 : 3);
      c.dg = {&dg, float_dtype(dg, "dg")};
      p.strides.dg = scalar_strides(dg);
    }
    if (p.delta) {
      const DLTensor& db = out.next("dbeta", 3);
      c.dbeta = {&db, float_dtype(db, "dbeta")};
      p.strides.dbeta = scalar_strides(db);
    }
    if (p.initial_state) state(&out.next("dh0", 4), "dh0", c.dh0, p.strides.dh0);
  }
  out.done();
  return c;
}

namespace {
cuda::In in(const Tensor& t) { return t.t ? cuda::In{t.data(), t.dtype} : cuda::In{}; }
cuda::Out out(const Tensor& t) { return t.t ? cuda::Out{t.data(), t.dtype} : cuda::Out{}; }
}  // namespace

cuda::ForwardTensors forward_tensors(const Call& c) {
  return {in(c.q), in(c.k), in(c.v), in(c.g), in(c.beta), in(c.h0), out(c.o), out(c.ht)};
}
cuda::BackwardTensors backward_tensors(const Call& c) {
  return {in(c.q),    in(c.k),   in(c.v),   in(c.g),   in(c.beta), in(c.h0), in(c.dout),
          in(c.dht),  out(c.dq), out(c.dk), out(c.dv), out(c.dg),  out(c.dbeta), out(c.dh0)};
}

}  // namespace glr::abi
