#include "binding.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace glr::kgate_export {

namespace {

using Shape = std::vector<std::int64_t>;

std::string shape_text(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

Shape shape_of(const DLTensor& t) { return Shape(t.shape, t.shape + t.ndim); }

// The attrs of the call, checked: every name known and given once, flags 0 or 1.
struct Attrs {
  std::optional<double> scale, delta, gate;
  double chunk = kDefaultChunk, initial_state = 0, final_state = 0, varlen = 0;

  explicit Attrs(const kgate_call& c) {
    std::vector<std::string> seen;
    for (int i = 0; i < c.n_attrs; ++i) {
      const std::string name = c.attrs[i].name ? c.attrs[i].name : "";
      const double v = c.attrs[i].value;
      if (std::find(seen.begin(), seen.end(), name) != seen.end())
        throw InvalidArgument("attrs", "\"" + name + "\" given twice (attrs[" + std::to_string(i) + "])");
      seen.push_back(name);
      if (name == "scale") scale = v;
      else if (name == "chunk") chunk = v;
      else if (name == "delta") delta = v;
      else if (name == "gate") gate = v;
      else if (name == "initial_state") initial_state = v;
      else if (name == "final_state") final_state = v;
      else if (name == "varlen") varlen = v;
      else throw InvalidArgument("attrs", "unknown attr \"" + name + "\" (glr takes scale, chunk, delta, gate, "
                                          "initial_state, final_state, varlen)");
    }
    // A given but non-finite scale is Params::validate's to name ("scale: must be finite").
    if (!scale) throw InvalidArgument("attrs.scale", "missing");
    if (!delta) throw InvalidArgument("attrs.delta", "missing (1: delta term, 0: none)");
    if (!gate) throw InvalidArgument("attrs.gate", "missing (0 none, 1 per token, 2 per head)");
    flag("delta", *delta);
    flag("initial_state", initial_state);
    flag("final_state", final_state);
    flag("varlen", varlen);
    if (*gate != 0 && *gate != 1 && *gate != 2)
      throw InvalidArgument("attrs.gate",
                            "must be 0 (none), 1 (per token) or 2 (per head), got " + std::to_string(*gate));
    // Below 2^31 so the conversion to an integer is exact and defined.
    if (!(chunk >= 1 && chunk < 2147483648.0) || chunk != std::floor(chunk))
      throw InvalidArgument("attrs.chunk", "must be a positive integer below 2^31, got " + std::to_string(chunk));
  }
  static void flag(const char* name, double v) {
    if (v != 0 && v != 1) throw InvalidArgument(std::string("attrs.") + name, "must be 0 or 1, got " + std::to_string(v));
  }
};

// Hands out the call's tensors in order, checking each against the shape the problem implies.
class Cursor {
 public:
  Cursor(const DLTensor* list, int n, const char* what, DLDeviceType device)
      : list_(list), n_(n), what_(what), device_(device) {}

  Arg take(const char* name, bool present) {
    Arg a;
    if (!present) return a;
    if (i_ >= n_)
      throw InvalidArgument(what_, std::string("too few: ") + name + " (" + what_ + "[" + std::to_string(i_) +
                                       "]) is missing for this problem (see glr/kgate/binding.hpp for the order)");
    a.t = &list_[i_++];
    if (a.t->device.device_type != device_)
      throw Refusal(std::string(name) + ": on device type " + std::to_string(a.t->device.device_type) +
                    "; this library takes tensors " +
                    (device_ == kDLCPU ? std::string("on the CPU only")
                                       : "of device type " + std::to_string(device_) + " only"));
    if (a.t->ndim > 0 && (a.t->shape == nullptr))
      throw InvalidArgument(name, "shape is null");
    a.elem = elem_of(*a.t, name);
    return a;
  }
  void finish() const {
    if (i_ != n_)
      throw InvalidArgument(what_, "too many: " + std::to_string(n_) + " given, this problem takes " + std::to_string(i_));
  }

 private:
  const DLTensor* list_;
  int n_, i_ = 0;
  const char* what_;
  DLDeviceType device_;
};

void expect_shape(const char* name, const Arg& a, const Shape& want, const char* how) {
  if (!a.t) return;
  const Shape got = shape_of(*a.t);
  if (got != want)
    throw InvalidArgument(name, "shape " + shape_text(got) + " does not match " + how + " " + shape_text(want));
}

void expect_float(const char* name, const Arg& a) {
  if (a.t && !is_float(a.elem)) throw InvalidArgument(name, std::string("must be a float tensor, got ") + name_of(a.elem));
}

TokenStrides token_strides(const Arg& a) {
  if (!a.t || !a.t->strides) return {};
  return {a.t->strides[0], a.t->strides[1], a.t->strides[2], a.t->strides[3]};
}
ScalarStrides scalar_strides(const Arg& a, bool per_head) {
  if (!a.t || !a.t->strides) return {};
  if (per_head) return {0, 0, a.t->strides[0]};
  return {a.t->strides[0], a.t->strides[1], a.t->strides[2]};
}
StateStrides state_strides(const Arg& a) {
  if (!a.t || !a.t->strides) return {};
  return {a.t->strides[0], a.t->strides[1], a.t->strides[2], a.t->strides[3]};
}

}  // namespace

std::vector<kgate_attr> attrs_of(const Params& p) {
  return {{"scale", p.scale},
          {"chunk", static_cast<double>(p.chunk)},
          {"delta", p.delta ? 1.0 : 0.0},
          {"gate", p.gate == Gate::none ? 0.0 : p.gate == Gate::per_token ? 1.0 : 2.0},
          {"initial_state", p.initial_state ? 1.0 : 0.0},
          {"final_state", p.final_state ? 1.0 : 0.0},
          {"varlen", p.varlen() ? 1.0 : 0.0}};
}

void say(const kgate_call& call, const std::string& text) {
  if (!call.message || call.message_capacity == 0) return;
  const std::size_t n = std::min(text.size(), call.message_capacity - 1);
  std::memcpy(call.message, text.data(), n);
  call.message[n] = '\0';
}

namespace {

// Every tensor of the call on one device (q's): the kernels run on one, and a CPU call has only one.
void expect_one_device(const Bound& b) {
  const DLDevice& d = b.q.t->device;
  for (auto [name, a] : {std::pair{"k", &b.k}, {"v", &b.v}, {"g", &b.g}, {"beta", &b.beta}, {"h0", &b.h0},
                         {"dout", &b.dout}, {"dht", &b.dht}, {"cu_seqlens", &b.cu_seqlens}, {"o", &b.o},
                         {"ht", &b.ht}, {"dq", &b.dq}, {"dk", &b.dk}, {"dv", &b.dv}, {"dg", &b.dg},
                         {"dbeta", &b.dbeta}, {"dh0", &b.dh0}})
    if (a->t && a->t->device.device_id != d.device_id)
      throw Refusal(std::string(name) + ": on device " + std::to_string(a->t->device.device_id) + ", q on device " +
                    std::to_string(d.device_id) + "; this library takes every tensor on one device");
}

Bound bind_call(const kgate_call& call, Pass pass, const BindOptions& options) {
  if (call.abi_version != KGATE_ABI_VERSION)
    throw Refusal("caller ABI version " + std::to_string(call.abi_version) + ", library built for " +
                  std::to_string(KGATE_ABI_VERSION));
  const Attrs at(call);
  Bound b;
  Params& p = b.p;
  p.delta = *at.delta == 1;
  p.gate = *at.gate == 0 ? Gate::none : *at.gate == 1 ? Gate::per_token : Gate::per_head;
  p.initial_state = at.initial_state == 1;
  p.final_state = at.final_state == 1;
  p.scale = *at.scale;
  p.chunk = static_cast<std::int64_t>(at.chunk);
  const bool varlen = at.varlen == 1, has_g = p.gate != Gate::none, per_head = p.gate == Gate::per_head;

  Cursor in(call.inputs, call.n_inputs, "inputs", options.device);
  b.q = in.take("q", true);
  b.k = in.take("k", true);
  b.v = in.take("v", true);
  b.g = in.take("g", has_g);
  b.beta = in.take("beta", p.delta);
  b.h0 = in.take("h0", p.initial_state);
  if (pass == Pass::backward) {
    b.dout = in.take("dout", true);
    b.dht = in.take("dht", p.final_state);
  }
  b.cu_seqlens = in.take("cu_seqlens", varlen);
  in.finish();
  Cursor out(call.outputs, call.n_outputs, "outputs", options.device);
  if (pass == Pass::forward) {
    b.o = out.take("o", true);
    b.ht = out.take("ht", p.final_state);
  } else {
    b.dq = out.take("dq", true);
    b.dk = out.take("dk", true);
    b.dv = out.take("dv", true);
    b.dg = out.take("dg", has_g);
    b.dbeta = out.take("dbeta", p.delta);
    b.dh0 = out.take("dh0", p.initial_state);
  }
  out.finish();
  expect_one_device(b);

  // Sizes from q and v; every other tensor must agree with them.
  if (b.q.t->ndim != 4) throw InvalidArgument("q", "must be [B, T, H, K], got rank " + std::to_string(b.q.t->ndim));
  if (b.v.t->ndim != 4) throw InvalidArgument("v", "must be [B, T, HV, V], got rank " + std::to_string(b.v.t->ndim));
  const Shape qs = shape_of(*b.q.t), vs = shape_of(*b.v.t);
  p.B = qs[0], p.T = qs[1], p.H = qs[2], p.K = qs[3];
  p.HV = vs[2], p.V = vs[3];
  if (vs[0] != p.B || vs[1] != p.T)
    throw InvalidArgument("v", "shape " + shape_text(vs) + " does not match q's batch and length [" +
                                   std::to_string(p.B) + ", " + std::to_string(p.T) + ", ...]");
  if (varlen) {
    const Arg& c = b.cu_seqlens;
    if (c.t->ndim != 1) throw InvalidArgument("cu_seqlens", "must be [N+1], got rank " + std::to_string(c.t->ndim));
    if (is_float(c.elem)) throw InvalidArgument("cu_seqlens", std::string("must be int32 or int64, got ") + name_of(c.elem));
    if (c.t->shape[0] < 2)
      throw InvalidArgument("cu_seqlens", "needs at least 2 offsets (one sequence), got " + std::to_string(c.t->shape[0]));
    if (options.host_offsets) {
      const std::vector<double> offs = gather<double>(*c.t, c.elem);
      p.cu_seqlens.assign(offs.begin(), offs.end());
    } else if (c.t->strides && c.t->strides[0] != 1) {
      // A valid call the kernels do not take (they read the offsets as one array on the device).
      throw Refusal("cu_seqlens: device offsets must be contiguous, got stride " + std::to_string(c.t->strides[0]));
    }
  }
  const std::int64_t N = varlen ? b.cu_seqlens.t->shape[0] - 1 : p.B;
  b.num_seqs = N;
  const Shape tok_qk = {p.B, p.T, p.H, p.K}, tok_v = {p.B, p.T, p.HV, p.V}, scalar = {p.B, p.T, p.HV};
  const Shape gate_shape = per_head ? Shape{p.HV} : scalar, state = {N, p.HV, p.K, p.V};
  expect_shape("k", b.k, tok_qk, "q's");
  expect_shape("g", b.g, gate_shape, per_head ? "the per-head gate's [HV] =" : "[B, T, HV] =");
  expect_shape("beta", b.beta, scalar, "[B, T, HV] =");
  expect_shape("h0", b.h0, state, "[N, HV, K, V] =");
  expect_shape("dout", b.dout, tok_v, "v's");
  expect_shape("dht", b.dht, state, "[N, HV, K, V] =");
  expect_shape("o", b.o, tok_v, "v's");
  expect_shape("ht", b.ht, state, "[N, HV, K, V] =");
  expect_shape("dq", b.dq, tok_qk, "q's");
  expect_shape("dk", b.dk, tok_qk, "q's");
  expect_shape("dv", b.dv, tok_v, "v's");
  expect_shape("dg", b.dg, gate_shape, "g's");
  expect_shape("dbeta", b.dbeta, scalar, "beta's");
  expect_shape("dh0", b.dh0, state, "h0's");
  for (auto [name, a] : {std::pair{"q", &b.q}, {"k", &b.k}, {"v", &b.v}, {"g", &b.g}, {"beta", &b.beta},
                         {"h0", &b.h0}, {"dout", &b.dout}, {"dht", &b.dht}, {"o", &b.o}, {"ht", &b.ht},
                         {"dq", &b.dq}, {"dk", &b.dk}, {"dv", &b.dv}, {"dg", &b.dg}, {"dbeta", &b.dbeta},
                         {"dh0", &b.dh0}})
    expect_float(name, *a);

  Strides& s = p.strides;
  s.q = token_strides(b.q), s.k = token_strides(b.k), s.v = token_strides(b.v), s.o = token_strides(b.o);
  s.g = scalar_strides(b.g, per_head), s.beta = scalar_strides(b.beta, false);
  s.h0 = state_strides(b.h0), s.ht = state_strides(b.ht);
  s.dout = token_strides(b.dout), s.dq = token_strides(b.dq), s.dk = token_strides(b.dk), s.dv = token_strides(b.dv);
  s.dg = scalar_strides(b.dg, per_head), s.dbeta = scalar_strides(b.dbeta, false);
  s.dht = state_strides(b.dht), s.dh0 = state_strides(b.dh0);
  // Null strides mean row-major (DLPack); kgate always passes them, other callers may not.
  Params dense = p;
  dense.set_contiguous_strides();
  auto fill = [](auto& have, const auto& dense_s, const Arg& a) {
    if (a.t && !a.t->strides) have = dense_s;
  };
  fill(s.q, dense.strides.q, b.q), fill(s.k, dense.strides.k, b.k), fill(s.v, dense.strides.v, b.v);
  fill(s.o, dense.strides.o, b.o), fill(s.g, dense.strides.g, b.g), fill(s.beta, dense.strides.beta, b.beta);
  fill(s.h0, dense.strides.h0, b.h0), fill(s.ht, dense.strides.ht, b.ht), fill(s.dout, dense.strides.dout, b.dout);
  fill(s.dq, dense.strides.dq, b.dq), fill(s.dk, dense.strides.dk, b.dk), fill(s.dv, dense.strides.dv, b.dv);
  fill(s.dg, dense.strides.dg, b.dg), fill(s.dbeta, dense.strides.dbeta, b.dbeta);
  fill(s.dht, dense.strides.dht, b.dht), fill(s.dh0, dense.strides.dh0, b.dh0);
  if (options.host_offsets || !varlen) {
    p.validate(pass);
  } else {
    // The offsets' values stay unread: (0, T, ..., T) stands in for them, so every other check (B = 1,
    // the states' N, strides) is the same as with host offsets.
    Params stand_in = p;
    stand_in.cu_seqlens.assign(static_cast<std::size_t>(N) + 1, p.T);
    stand_in.cu_seqlens[0] = 0;
    stand_in.validate(pass);
  }
  return b;
}

}  // namespace

Bound bind(const kgate_call& call, Pass pass, const BindOptions& options) {
  try {
    return bind_call(call, pass, options);
  } catch (const BadCall&) {
    throw;
  } catch (const InvalidArgument& e) {
    throw BadCall(e);
  }
}

}  // namespace glr::kgate_export
