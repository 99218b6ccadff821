// The chunked passes: the stages of chunked_forward.cpp and chunked_backward.cpp in the order the GPU runs
// them, and the strided entry points around them.
#include "glr/reference/chunked.hpp"

namespace glr::reference {

template <class Real>
ForwardStages<Real> chunked_forward_stages(const Params& p, const Inputs<Real>& in, const ChunkedOptions& opt) {
  ForwardStages<Real> f;
  f.plan = make_chunk_plan(p);
  f.G = chunk_local_cumsum(p, f.plan, in);
  if (p.delta) {
    f.L = chunk_scaled_kkt(p, f.plan, in, f.G);
    f.A = solve_tril(p, f.plan, f.L, opt.storage);
    recompute_w_u(p, f.plan, in, f.G, f.A, opt.storage, f.W, f.U);
  }
  chunk_state_forward(p, f.plan, in, f.G, f.U, f.W, opt.storage, f.S_start, f.V_new, f.ht);
  f.o = chunk_output(p, f.plan, in, f.G, f.S_start, f.V_new);
  return f;
}

template <class Real>
BackwardStages<Real> chunked_backward_stages(const Params& p, const Inputs<Real>& in, const ChunkedOptions& opt) {
  BackwardStages<Real> r;
  r.forward = chunked_forward_stages(p, in, opt);
  const ForwardStages<Real>& f = r.forward;
  r.dV_local = chunk_local_dv(p, f.plan, in, f.G, opt.storage);
  chunk_state_backward(p, f.plan, in, f.G, f.W, r.dV_local, opt.storage, r.dS_end, r.dV_new, r.dh0);
  chunk_dqkwg(p, f.plan, in, f.G, f.S_start, f.V_new, r.dS_end, r.dV_new, opt.storage, r.dq_hv, r.dk_hv, r.dW,
              r.dG);
  if (p.delta)
    wy_backward(p, f.plan, in, f.G, f.A, r.dW, r.dV_new, r.dk_wy, r.dv, r.dbeta, r.dG_wy);
  else
    r.dv = r.dV_new;  // V_new = v
  if (p.gate != Gate::none) r.dg_token = chunk_reverse_cumsum(p, f.plan, r.dG, r.dG_wy);
  reduce_gradients(p, f.plan, r.dq_hv, r.dk_hv, r.dk_wy, r.dg_token, r.dq, r.dk, r.dg);
  return r;
}

template <class Real>
void chunked_forward(const Params& p, const ForwardTensors<Real>& t, const ChunkedOptions& opt) {
  p.validate(Pass::forward);
  check_pointers(p, t);
  const ForwardStages<Real> f = chunked_forward_stages(p, gather_forward<Real>(p, t), opt);
  scatter(f.o, t.o, io::strides_of(p.strides.o));
  if (p.final_state) scatter(f.ht, t.ht, io::strides_of(p.strides.ht));
}

template <class Real>
void chunked_backward(const Params& p, const BackwardTensors<Real>& t, const ChunkedOptions& opt) {
  p.validate(Pass::backward);
  check_pointers(p, t);
  const BackwardStages<Real> r = chunked_backward_stages(p, gather_backward<Real>(p, t), opt);
  const Strides& s = p.strides;
  scatter(r.dq, t.dq, io::strides_of(s.dq));
  scatter(r.dk, t.dk, io::strides_of(s.dk));
  scatter(r.dv, t.dv, io::strides_of(s.dv));
  if (p.gate != Gate::none) scatter(r.dg, t.dg, io::gate_strides(p, s.dg));
  if (p.delta) scatter(r.dbeta, t.dbeta, io::strides_of(s.dbeta));
  if (p.initial_state) scatter(r.dh0, t.dh0, io::strides_of(s.dh0));
}

#define GLR_INSTANTIATE_CHUNKED(Real)                                                                     \
  template ForwardStages<Real> chunked_forward_stages(const Params&, const Inputs<Real>&,                 \
                                                      const ChunkedOptions&);                             \
  template BackwardStages<Real> chunked_backward_stages(const Params&, const Inputs<Real>&,               \
                                                        const ChunkedOptions&);                           \
  template void chunked_forward(const Params&, const ForwardTensors<Real>&, const ChunkedOptions&);       \
  template void chunked_backward(const Params&, const BackwardTensors<Real>&, const ChunkedOptions&);
GLR_INSTANTIATE_CHUNKED(float)
GLR_INSTANTIATE_CHUNKED(double)

}  // namespace glr::reference
