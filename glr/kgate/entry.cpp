// glr's CPU implementations behind kgate's C ABI (include/kgate/abi.h), so kgate verifies them like any
// candidate. Built twice by glr/CMakeLists.txt: libglr_kgate_fwd.so (GLR_KGATE_BACKWARD=0) and
// libglr_kgate_bwd.so (=1). Each exports
//
//   kgate_run        the chunked algorithm in float (working precision f32), intermediates in float
//   kgate_run_bf16   the same with every stored intermediate rounded to bf16 (the GPU's storage model)
//   kgate_oracle     the float64 exact recurrence (glr::reference::recurrent_*<double>)
//   kgate_run_recurrent_f32   the exact recurrence in float: the same-precision reference, to tell a
//                    property of f32 arithmetic on this operator from one of the chunked algorithm
//
// Arguments and attrs: glr/kgate/binding.hpp. A bad problem returns KGATE_ERROR with the glr message
// naming the argument; a tensor off the CPU, tensors on two devices or a wrong ABI version KGATE_REFUSED. Outputs are written
// only after every check passed, and every element of every output is written exactly once.
#include <type_traits>
#include <vector>

#include "binding.hpp"
#include "glr/reference/chunked.hpp"
#include "glr/reference/oracle.hpp"

#ifndef GLR_KGATE_BACKWARD
#error "GLR_KGATE_BACKWARD must be 0 (forward library) or 1 (backward library)"
#endif

namespace glr::kgate_export {
namespace {

enum class Impl { chunked, chunked_bf16, recurrent_f32, oracle };

// Inputs as dense Real arrays (the Bound's strides honoured), held so pointers stay valid.
template <class Real>
struct Dense {
  std::vector<Real> data;
  const Real* ptr() const { return data.empty() ? nullptr : data.data(); }
  Real* ptr() { return data.empty() ? nullptr : data.data(); }
};

template <class Real>
Dense<Real> in(const Arg& a) {
  return a.t ? Dense<Real>{gather<Real>(*a.t, a.elem)} : Dense<Real>{};
}

template <class Real>
Dense<Real> out(const Arg& a) {
  if (!a.t) return {};
  std::int64_t n = 1;
  for (int d = 0; d < a.t->ndim; ++d) n *= a.t->shape[d];
  return Dense<Real>{std::vector<Real>(static_cast<std::size_t>(n))};
}

template <class Real>
void write(const Dense<Real>& d, const Arg& a) {
  if (a.t) scatter(d.data, *a.t, a.elem);
}

template <class Real>
void forward(const Bound& b, Impl impl) {
  Params p = b.p;  // the computation runs on dense copies
  p.set_contiguous_strides();
  Dense<Real> q = in<Real>(b.q), k = in<Real>(b.k), v = in<Real>(b.v), g = in<Real>(b.g),
              beta = in<Real>(b.beta), h0 = in<Real>(b.h0);
  Dense<Real> o = out<Real>(b.o), ht = out<Real>(b.ht);
  const ForwardTensors<Real> t{q.ptr(), k.ptr(), v.ptr(), g.ptr(), beta.ptr(), h0.ptr(), o.ptr(), ht.ptr()};
  if constexpr (std::is_same_v<Real, double>) {
    reference::oracle_forward(p, t);
  } else if (impl == Impl::recurrent_f32) {
    reference::recurrent_forward(p, t);
  } else {
    reference::ChunkedOptions opt;
    opt.storage = impl == Impl::chunked_bf16 ? reference::Storage::bf16 : reference::Storage::working;
    reference::chunked_forward(p, t, opt);
  }
  write(o, b.o);
  write(ht, b.ht);
}

template <class Real>
void backward(const Bound& b, Impl impl) {
  Params p = b.p;
  p.set_contiguous_strides();
  Dense<Real> q = in<Real>(b.q), k = in<Real>(b.k), v = in<Real>(b.v), g = in<Real>(b.g),
              beta = in<Real>(b.beta), h0 = in<Real>(b.h0), dout = in<Real>(b.dout), dht = in<Real>(b.dht);
  Dense<Real> dq = out<Real>(b.dq), dk = out<Real>(b.dk), dv = out<Real>(b.dv), dg = out<Real>(b.dg),
              dbeta = out<Real>(b.dbeta), dh0 = out<Real>(b.dh0);
  const BackwardTensors<Real> t{q.ptr(),  k.ptr(),  v.ptr(),  g.ptr(),     beta.ptr(), h0.ptr(), dout.ptr(),
                                dht.ptr(), dq.ptr(), dk.ptr(), dv.ptr(), dg.ptr(),   dbeta.ptr(), dh0.ptr()};
  if constexpr (std::is_same_v<Real, double>) {
    reference::oracle_backward(p, t);
  } else if (impl == Impl::recurrent_f32) {
    reference::recurrent_backward(p, t);
  } else {
    reference::ChunkedOptions opt;
    opt.storage = impl == Impl::chunked_bf16 ? reference::Storage::bf16 : reference::Storage::working;
    reference::chunked_backward(p, t, opt);
  }
  write(dq, b.dq);
  write(dk, b.dk);
  write(dv, b.dv);
  write(dg, b.dg);
  write(dbeta, b.dbeta);
  write(dh0, b.dh0);
}

int32_t entry(const kgate_call* call, Impl impl) {
  // Every valid problem is taken: a bad call is the caller's error (KGATE_ERROR).
  return guarded_entry(call, KGATE_ERROR, [&] {
    const Pass pass = GLR_KGATE_BACKWARD ? Pass::backward : Pass::forward;
    const Bound b = bind(*call, pass);
    const bool f64 = impl == Impl::oracle;
    if (pass == Pass::forward)
      f64 ? forward<double>(b, impl) : forward<float>(b, impl);
    else
      f64 ? backward<double>(b, impl) : backward<float>(b, impl);
  });
}

}  // namespace
}  // namespace glr::kgate_export

extern "C" {
KGATE_EXPORT int32_t kgate_abi_version(void) { return KGATE_ABI_VERSION; }
KGATE_EXPORT int32_t kgate_device(void) { return kDLCPU; }
KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  return glr::kgate_export::entry(call, glr::kgate_export::Impl::chunked);
}
KGATE_EXPORT int32_t kgate_run_bf16(const kgate_call* call) {
  return glr::kgate_export::entry(call, glr::kgate_export::Impl::chunked_bf16);
}
KGATE_EXPORT int32_t kgate_run_recurrent_f32(const kgate_call* call) {
  return glr::kgate_export::entry(call, glr::kgate_export::Impl::recurrent_f32);
}
KGATE_EXPORT int32_t kgate_oracle(const kgate_call* call) {
  return glr::kgate_export::entry(call, glr::kgate_export::Impl::oracle);
}
}
