// Every check the CUDA entry points make before enqueuing anything. Params::validate covers sizes, head
// dims, chunk, scale, cu_seqlens and strides; this adds what only the kernels care about: which tensors
// are present, their dtypes, their alignment, the device offsets and the launch limits.
#include "setup.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace glr::cuda {

const char* name_of(DType t) {
  switch (t) {
    case DType::f32: return "fp32";
    case DType::f16: return "fp16";
    case DType::bf16: return "bf16";
    case DType::f64: return "fp64";
  }
  return "?";
}

namespace {

std::string str(std::int64_t x) { return std::to_string(x); }

bool is_known(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16 || t == DType::f64; }

// The problem as the kernels see it: with device-only offsets, a host-side stand-in with N + 1 offsets
// (0, T, ..., T) lets Params::validate check the states' N without knowing the real offsets.
struct Effective {
  Params params;
  std::int64_t N = 1;
  bool varlen = false;
  bool device_only = false;
};

const void* offsets_ptr(const DeviceOffsets& off) {
  return off.cu_seqlens ? static_cast<const void*>(off.cu_seqlens) : static_cast<const void*>(off.cu_seqlens32);
}

Effective effective(const Params& params, const DeviceOffsets& off, Pass pass) {
  Effective e{params};
  if (off.cu_seqlens && off.cu_seqlens32)
    throw InvalidArgument("cu_seqlens", "give the device offsets once: int64 (cu_seqlens) or int32 (cu_seqlens32)");
  const void* cu = offsets_ptr(off);
  if (params.varlen()) {
    if (cu == nullptr)
      throw InvalidArgument("cu_seqlens", "the kernels read the offsets on the device: pass the device copy of "
                                          "Params::cu_seqlens in DeviceOffsets::cu_seqlens");
    if (off.num_seqs != 0 && off.num_seqs != params.num_seqs())
      throw InvalidArgument("cu_seqlens", "DeviceOffsets::num_seqs = " + str(off.num_seqs) +
                                              " differs from the " + str(params.num_seqs()) +
                                              " sequences of Params::cu_seqlens");
    e.varlen = true;
  } else if (cu != nullptr) {
    if (off.num_seqs < 1)
      throw InvalidArgument("cu_seqlens", "device-only offsets need DeviceOffsets::num_seqs >= 1, got " +
                                              str(off.num_seqs));
    if (params.B != 1)
      throw InvalidArgument("B", "must be 1 with packed sequences (cu_seqlens), got " + str(params.B));
    e.params.cu_seqlens.assign(static_cast<std::size_t>(off.num_seqs) + 1, params.T);
    e.params.cu_seqlens[0] = 0;
    e.varlen = e.device_only = true;
  } else if (off.num_seqs != 0) {
    throw InvalidArgument("cu_seqlens", "DeviceOffsets::num_seqs is set but no device offsets are given");
  }
  const std::uintptr_t align = off.cu_seqlens32 ? alignof(std::int32_t) : alignof(std::int64_t);
  if (e.varlen && reinterpret_cast<std::uintptr_t>(cu) % align != 0)
    throw InvalidArgument("cu_seqlens", "device offsets must be aligned to their element size");
  e.params.validate(pass, Backend::gpu);
  e.N = e.params.num_seqs();
  return e;
}

Problem sizes(const Effective& e, const DeviceOffsets& off) {
  const Params& P = e.params;
  Problem p;
  p.B = P.B;
  p.T = P.T;
  p.H = P.H;
  p.HV = P.HV;
  p.N = e.N;
  p.K = static_cast<std::int32_t>(P.K);
  p.V = static_cast<std::int32_t>(P.V);
  p.group = P.group();
  p.rows = P.B * P.T;
  p.nt = (P.T + kChunk - 1) / kChunk;
  p.max_chunks = chunk_upper_bound(P.B, P.T, e.N, e.varlen);
  p.scale = P.scale;
  p.delta = P.delta ? 1 : 0;
  p.gate = P.gate == Gate::none ? kGateNone : P.gate == Gate::per_token ? kGatePerToken : kGatePerHead;
  p.varlen = e.varlen ? 1 : 0;
  p.cu = e.varlen ? offsets_ptr(off) : nullptr;
  p.cu32 = e.varlen && off.cu_seqlens32 != nullptr ? 1 : 0;
  // Launch limits: value heads and V slices ride in grid y/z (< 65536), chunks and sequences in x (< 2^31).
  if (p.HV > 65535) throw InvalidArgument("HV", "at most 65535 value heads, got " + str(p.HV));
  constexpr std::int64_t kMaxX = std::numeric_limits<std::int32_t>::max();
  if (p.max_chunks > kMaxX) throw InvalidArgument("T", "too many chunks for one launch: " + str(p.max_chunks));
  if (p.N > kMaxX) throw InvalidArgument("cu_seqlens", "too many sequences for one launch: " + str(p.N));
  return p;
}

class Checker {
 public:
  Checker(const SetupOptions& opt) : opt_(opt) {}

  // Presence must match what the problem says: a tensor the member does not have is an error too, so a
  // caller who believes the problem is gated while Params says otherwise hears about it.
  template <class T>
  bool presence(const char* name, const T& t, bool wanted, const char* why) const {
    if (wanted && t.data == nullptr) throw InvalidArgument(name, std::string("missing (") + why + ")");
    if (!wanted && t.data != nullptr)
      throw InvalidArgument(name, std::string("given, but the problem has none (") + why + ")");
    return wanted;
  }
  template <class T>
  void aligned(const char* name, const T& t) const {
    if (!is_known(t.dtype)) throw InvalidArgument(std::string(name) + ".dtype", "unknown dtype code");
    const auto a = reinterpret_cast<std::uintptr_t>(t.data);
    if (a % static_cast<std::uintptr_t>(dtype_bytes(t.dtype)) != 0)
      throw InvalidArgument(name, "pointer is not aligned to its " + str(dtype_bytes(t.dtype)) + "-byte " +
                                      name_of(t.dtype) + " elements");
  }
  template <class T>
  void same(const char* name, const T& t, DType want, const char* as) const {
    aligned(name, t);
    if (t.dtype != want)
      throw InvalidArgument(std::string(name) + ".dtype", std::string(name_of(t.dtype)) + " does not match " + as +
                                                              " (" + name_of(want) + ")");
  }
  void token_dtype(const In& q) const {
    aligned("q", q);
    const bool ok = q.dtype == DType::bf16 || q.dtype == DType::f16 ||
                    (opt_.wide_dtypes && (q.dtype == DType::f32 || q.dtype == DType::f64));
    if (!ok)
      throw InvalidArgument("q.dtype", std::string(name_of(q.dtype)) + " is not supported (q, k, v: bf16 or fp16)");
  }
  template <class T>
  void scalar_dtype(const char* name, const T& t, DType x) const {
    aligned(name, t);
    if (!(t.dtype == DType::f32 || t.dtype == x || opt_.wide_dtypes))
      throw InvalidArgument(std::string(name) + ".dtype", std::string(name_of(t.dtype)) +
                                                              " is not supported (fp32 or the dtype of q, " +
                                                              name_of(x) + ")");
  }
  template <class T>
  void state_dtype(const char* name, const T& t) const {
    aligned(name, t);
    if (!(t.dtype == DType::f32 || opt_.wide_dtypes))
      throw InvalidArgument(std::string(name) + ".dtype",
                            std::string(name_of(t.dtype)) + " is not supported (states are fp32)");
  }

 private:
  static int dtype_bytes(DType t) { return t == DType::f64 ? 8 : t == DType::f32 ? 4 : 2; }
  const SetupOptions& opt_;
};

TensorRef token(const void* p, DType dt, const TokenStrides& s) {
  TensorRef r;
  r.p = const_cast<void*>(p);
  r.dt = dt;
  r.s[0] = s.batch;
  r.s[1] = s.token;
  r.s[2] = s.head;
  r.s[3] = s.dim;
  return r;
}
TensorRef scalar(const void* p, DType dt, const ScalarStrides& s, bool per_head) {
  TensorRef r;
  r.p = const_cast<void*>(p);
  r.dt = dt;
  r.s[0] = per_head ? 0 : s.batch;
  r.s[1] = per_head ? 0 : s.token;
  r.s[2] = s.head;
  return r;
}
TensorRef state(const void* p, DType dt, const StateStrides& s) {
  TensorRef r;
  r.p = const_cast<void*>(p);
  r.dt = dt;
  r.s[0] = s.seq;
  r.s[1] = s.head;
  r.s[2] = s.k;
  r.s[3] = s.v;
  return r;
}

// The inputs both passes read.
template <class Tensors>
void common_inputs(Problem& p, const Params& P, const Tensors& t, const Checker& ck) {
  const Strides& s = P.strides;
  ck.token_dtype(t.q);
  const DType x = t.q.dtype;
  ck.presence("q", t.q, true, "always needed");
  ck.presence("k", t.k, true, "always needed");
  ck.presence("v", t.v, true, "always needed");
  ck.same("k", t.k, x, "q");
  ck.same("v", t.v, x, "q");
  p.q = token(t.q.data, x, s.q);
  p.k = token(t.k.data, x, s.k);
  p.v = token(t.v.data, x, s.v);
  const bool per_head = P.gate == Gate::per_head;
  if (ck.presence("g", t.g, P.gate != Gate::none, "the gate")) {
    ck.scalar_dtype("g", t.g, x);
    p.g = scalar(t.g.data, t.g.dtype, s.g, per_head);
  }
  if (ck.presence("beta", t.beta, P.delta, "the delta rule")) {
    ck.scalar_dtype("beta", t.beta, x);
    p.beta = scalar(t.beta.data, t.beta.dtype, s.beta, false);
  }
  if (ck.presence("h0", t.h0, P.initial_state, "Params::initial_state")) {
    ck.state_dtype("h0", t.h0);
    p.h0 = state(t.h0.data, t.h0.dtype, s.h0);
  }
}

}  // namespace

Problem setup_sizes(const Params& params, const DeviceOffsets& off, Pass pass) {
  return sizes(effective(params, off, pass), off);
}

Problem setup_forward(const Params& params, const ForwardTensors& t, const DeviceOffsets& off,
                      const SetupOptions& opt) {
  const Effective e = effective(params, off, Pass::forward);
  Problem p = sizes(e, off);
  const Checker ck(opt);
  const Params& P = e.params;
  common_inputs(p, P, t, ck);
  ck.presence("o", t.o, true, "always written");
  ck.same("o", t.o, t.q.dtype, "q");
  p.o = token(t.o.data, t.o.dtype, P.strides.o);
  if (ck.presence("ht", t.ht, P.final_state, "Params::final_state")) {
    ck.state_dtype("ht", t.ht);
    p.ht = state(t.ht.data, t.ht.dtype, P.strides.ht);
  }
  return p;
}

Problem setup_backward(const Params& params, const BackwardTensors& t, const DeviceOffsets& off,
                       const SetupOptions& opt) {
  const Effective e = effective(params, off, Pass::backward);
  Problem p = sizes(e, off);
  const Checker ck(opt);
  const Params& P = e.params;
  const Strides& s = P.strides;
  common_inputs(p, P, t, ck);
  const DType x = t.q.dtype;
  ck.presence("dout", t.dout, true, "always needed");
  ck.same("dout", t.dout, x, "q");
  p.dout = token(t.dout.data, x, s.dout);
  if (ck.presence("dht", t.dht, P.final_state, "Params::final_state")) {
    ck.state_dtype("dht", t.dht);
    p.dht = state(t.dht.data, t.dht.dtype, s.dht);
  }
  ck.presence("dq", t.dq, true, "always written");
  ck.presence("dk", t.dk, true, "always written");
  ck.presence("dv", t.dv, true, "always written");
  ck.same("dq", t.dq, x, "q");
  ck.same("dk", t.dk, x, "q");
  ck.same("dv", t.dv, x, "q");
  p.dq = token(t.dq.data, x, s.dq);
  p.dk = token(t.dk.data, x, s.dk);
  p.dv = token(t.dv.data, x, s.dv);
  if (ck.presence("dg", t.dg, P.gate != Gate::none, "the gate")) {
    ck.same("dg", t.dg, t.g.dtype, "g");
    p.dg = scalar(t.dg.data, t.dg.dtype, s.dg, P.gate == Gate::per_head);
  }
  if (ck.presence("dbeta", t.dbeta, P.delta, "the delta rule")) {
    ck.same("dbeta", t.dbeta, t.beta.dtype, "beta");
    p.dbeta = scalar(t.dbeta.data, t.dbeta.dtype, s.dbeta, false);
  }
  if (ck.presence("dh0", t.dh0, P.initial_state, "Params::initial_state")) {
    ck.state_dtype("dh0", t.dh0);
    p.dh0 = state(t.dh0.data, t.dh0.dtype, s.dh0);
  }
  return p;
}

}  // namespace glr::cuda
