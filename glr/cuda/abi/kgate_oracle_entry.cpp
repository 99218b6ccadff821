// The float64 oracle for glr's CUDA contracts: the oracle engineer's exact recurrence
// (glr/reference/oracle.hpp) behind kgate_oracle, reading the call with the same conventions as the
// kernels' entry points (abi_call.hpp, glr/kgate/binding.hpp). Built as glr_cuda_oracle_fwd and
// glr_cuda_oracle_bwd.
#include "abi_call.hpp"
#include "glr/reference/oracle.hpp"

using namespace glr;

namespace {

const double* in(const abi::Tensor& t) {
  if (t.t && t.dtype != cuda::DType::f64) throw abi::Refusal("the oracle takes float64 tensors");
  return static_cast<const double*>(t.data);
}
double* out(const abi::Tensor& t) { return const_cast<double*>(in(t)); }

}  // namespace

extern "C" KGATE_EXPORT int32_t kgate_abi_version(void) { return KGATE_ABI_VERSION; }
extern "C" KGATE_EXPORT int32_t kgate_device(void) { return kDLCPU; }

extern "C" KGATE_EXPORT int32_t kgate_oracle(const kgate_call* call) {
  return abi::guarded_entry(call, [&] {
    const abi::Call c = abi::read_call(*call, GLR_KGATE_BACKWARD != 0, kDLCPU, true);
    if (GLR_KGATE_BACKWARD) {
      const glr::BackwardTensors<double> t{in(c.q),   in(c.k),    in(c.v),     in(c.g),   in(c.beta),
                                           in(c.h0),  in(c.dout), in(c.dht),   out(c.dq), out(c.dk),
                                           out(c.dv), out(c.dg),  out(c.dbeta), out(c.dh0)};
      reference::oracle_backward(c.params, t);
    } else {
      const glr::ForwardTensors<double> t{in(c.q),  in(c.k),    in(c.v),  in(c.g),
                                          in(c.beta), in(c.h0), out(c.o), out(c.ht)};
      reference::oracle_forward(c.params, t);
    }
  });
}
