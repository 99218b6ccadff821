#include "abi_call.hpp"

namespace glr::abi {
namespace {

cuda::DType dtype_of(kgate_export::Elem e) {
  using kgate_export::Elem;
  switch (e) {
    case Elem::f64: return cuda::DType::f64;
    case Elem::f32: return cuda::DType::f32;
    case Elem::f16: return cuda::DType::f16;
    case Elem::bf16: return cuda::DType::bf16;
    case Elem::i32:
    case Elem::i64: break;
  }
  throw InvalidArgument("dtype", "an integer tensor where glr takes a float one");  // bind() rules this out
}

Tensor tensor(const kgate_export::Arg& a) {
  if (!a.t) return {};
  return {a.t, dtype_of(a.elem), a.data()};
}

cuda::In in(const Tensor& t) { return t.t ? cuda::In{t.data, t.dtype} : cuda::In{}; }
cuda::Out out(const Tensor& t) { return t.t ? cuda::Out{t.data, t.dtype} : cuda::Out{}; }

}  // namespace

Call read_call(const kgate_call& kc, bool backward, DLDeviceType device) {
  const kgate_export::Bound b =
      kgate_export::bind(kc, backward ? Pass::backward : Pass::forward, {device, /*host_offsets=*/false});
  Call c;
  c.params = b.p;
  c.backward = backward;
  c.q = tensor(b.q), c.k = tensor(b.k), c.v = tensor(b.v), c.g = tensor(b.g), c.beta = tensor(b.beta);
  c.h0 = tensor(b.h0), c.dout = tensor(b.dout), c.dht = tensor(b.dht);
  c.o = tensor(b.o), c.ht = tensor(b.ht);
  c.dq = tensor(b.dq), c.dk = tensor(b.dk), c.dv = tensor(b.dv), c.dg = tensor(b.dg), c.dbeta = tensor(b.dbeta);
  c.dh0 = tensor(b.dh0);
  if (b.cu_seqlens.t) {
    c.offsets.num_seqs = b.num_seqs;
    if (b.cu_seqlens.elem == kgate_export::Elem::i64)
      c.offsets.cu_seqlens = static_cast<const std::int64_t*>(b.cu_seqlens.data());
    else
      c.offsets.cu_seqlens32 = static_cast<const std::int32_t*>(b.cu_seqlens.data());
  }
  return c;
}

cuda::ForwardTensors forward_tensors(const Call& c) {
  return {in(c.q), in(c.k), in(c.v), in(c.g), in(c.beta), in(c.h0), out(c.o), out(c.ht)};
}
cuda::BackwardTensors backward_tensors(const Call& c) {
  return {in(c.q),    in(c.k),   in(c.v),   in(c.g),   in(c.beta), in(c.h0), in(c.dout),
          in(c.dht),  out(c.dq), out(c.dk), out(c.dv), out(c.dg),  out(c.dbeta), out(c.dh0)};
}

}  // namespace glr::abi
