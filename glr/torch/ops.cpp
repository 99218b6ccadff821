// The glr operators in PyTorch (namespace glr), their CPU and Meta kernels, and the autograd wiring.
//
//   glr::fwd        (q, k, v, g?, beta?, h0?, cu_seqlens?, scale, delta, gate, final_state) -> (o, ht)
//   glr::bwd        (q, k, v, g?, beta?, h0?, cu_seqlens?, dout, dht?, scale, delta, gate)
//                   -> (dq, dk, dv, dg, dbeta, dh0)
//   glr::fwd_save   (the arguments of fwd) -> (o, ht, saved, saved_key): fwd that also returns the forward's
//                   saved intermediates (glr/glr_cuda.hpp Saved): uint8 saved and its int64 [12] CPU key (CPU
//                   kernel: nothing saved, an empty saved and a key of zeros)
//   glr::bwd_saved  (the arguments of bwd, saved, saved_key) -> bwd's outputs, word for word, the CUDA sm90 path
//                   reading the forward's wy outputs from saved instead of recomputing them (a key of zeros: bwd)
//   glr::recurrence (the arguments of fwd) -> (o, ht): fwd with autograd (backward = bwd); on CUDA tensors
//                   fwd_save and bwd_saved (the saved tensor kept for the backward: 66 MiB at B8 T4096 H16)
//   glr::oracle_fwd, glr::oracle_bwd: the float64 recurrence and its exact backward (CPU, float64 only), the
//                   judge of the tests
//
// Layouts are flash-linear-attention's (glr/params.hpp). gate: 0 none, 1 per token g [B, T, HV], 2 per
// head g [HV]. A tensor the problem does not have (ht without final_state, dg without a gate, dbeta without
// the delta term, dh0 without h0) comes back as an empty tensor of shape [0], so every op has a fixed
// number of outputs that torch.compile can trace; the autograd wrapper maps them to "no gradient".
//
// CPU kernels: the chunked CPU algorithm (glr/reference) in float64 for float64 inputs, else in float32
// (fp16/bf16 inputs are converted to fp32 and the results back). CUDA kernels: cuda_ops.cpp.
//
// The Meta kernels read concrete sizes: torch.compile traces them with static shapes (one shape per
// compilation); symbolic (dynamic) shapes would need SymInt versions, not written yet. bwd has no
// derivative of its own, so there is no double backward.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include "glr/glr_cuda.hpp"  // kSavedKeyWords (a header without CUDA: the CPU build includes it too)
#include "glr/reference/chunked.hpp"
#include "glr/reference/oracle.hpp"
#include "problem.hpp"

namespace glr::torch_ops {
namespace {

using at::Tensor;

bool present(const OptTensor& t) { return t.has_value() && t->defined(); }

std::int64_t num_seqs(const Params& p, const OptTensor& cu) { return present(cu) ? cu->size(0) - 1 : p.B; }

std::vector<std::int64_t> host_offsets(const char* op, const OptTensor& cu) {
  if (!present(cu)) return {};
  TORCH_CHECK(cu->device().is_cpu(), op, ": cu_seqlens: must be on the CPU for the CPU kernel");
  const Tensor c = cu->to(at::kLong).contiguous();
  return std::vector<std::int64_t>(c.data_ptr<std::int64_t>(), c.data_ptr<std::int64_t>() + c.numel());
}

// Output shapes and dtypes: one definition for the CPU, CUDA and Meta kernels.
std::tuple<Tensor, Tensor> forward_outputs(const Params& p, const Call& c, bool final_state,
                                           const at::TensorOptions& base) {
  const std::int64_t N = num_seqs(p, c.cu_seqlens);
  Tensor o = at::empty({p.B, p.T, p.HV, p.V}, base.dtype(c.v.scalar_type()));
  Tensor ht = final_state ? at::empty({N, p.HV, p.K, p.V}, base.dtype(state_dtype(c.q)))
                          : at::empty({0}, base.dtype(state_dtype(c.q)));
  return {o, ht};
}

struct Grads {
  Tensor dq, dk, dv, dg, dbeta, dh0;
  std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor> tuple() const { return {dq, dk, dv, dg, dbeta, dh0}; }
};

// Each gradient in its input's dtype, or every one in `working` when given (the CPU's compute buffers).
Grads backward_outputs(const Params& p, const Call& c, const at::TensorOptions& base,
                       c10::optional<at::ScalarType> working = c10::nullopt) {
  const std::int64_t N = num_seqs(p, c.cu_seqlens);
  auto as = [&](at::ScalarType t) { return base.dtype(working ? *working : t); };
  const auto x = as(c.q.scalar_type());
  Grads r;
  r.dq = at::empty({p.B, p.T, p.H, p.K}, x);
  r.dk = at::empty({p.B, p.T, p.H, p.K}, x);
  r.dv = at::empty({p.B, p.T, p.HV, p.V}, x);
  r.dg = present(c.g) ? at::empty(c.g->sizes(), as(c.g->scalar_type())) : at::empty({0}, x);
  r.dbeta = present(c.beta) ? at::empty(c.beta->sizes(), as(c.beta->scalar_type())) : at::empty({0}, x);
  r.dh0 = present(c.h0) ? at::empty({N, p.HV, p.K, p.V}, as(state_dtype(c.q))) : at::empty({0}, x);
  return r;
}

// ---- CPU ---------------------------------------------------------------------------------------------

enum class Algorithm { chunked, oracle };

template <class Real>
const Real* ptr_or_null(const Tensor& t) {
  return t.defined() && t.numel() > 0 ? t.data_ptr<Real>() : nullptr;
}
template <class Real>
Real* out_ptr(const Tensor& t) {
  return t.defined() && t.numel() > 0 ? t.data_ptr<Real>() : nullptr;
}

// The inputs in the working type (no copy when already in it: strides are passed through).
struct Working {
  Tensor q, k, v, g, beta, h0;
  Working(const Call& c, at::ScalarType rt)
      : q(c.q.to(rt)), k(c.k.to(rt)), v(c.v.to(rt)), g(present(c.g) ? c.g->to(rt) : Tensor()),
        beta(present(c.beta) ? c.beta->to(rt) : Tensor()), h0(present(c.h0) ? c.h0->to(rt) : Tensor()) {}
  void strides_into(Params& p) const {
    p.strides.q = token_strides(q);
    p.strides.k = token_strides(k);
    p.strides.v = token_strides(v);
    if (g.defined()) p.strides.g = scalar_strides(g, p.gate);
    if (beta.defined()) p.strides.beta = scalar_strides(beta, Gate::per_token);  // beta is always [B, T, HV]
    if (h0.defined()) p.strides.h0 = state_strides(h0);
  }
};

at::ScalarType working_type(const Call& c, Algorithm a) {
  if (a == Algorithm::oracle)
    TORCH_CHECK(c.q.scalar_type() == at::kDouble, c.op, ": q: the oracle runs in float64 only, got ",
                c.q.scalar_type());
  return c.q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

template <class Real>
void run_forward(Algorithm a, const Params& p, const ForwardTensors<Real>& t) {
  if constexpr (std::is_same_v<Real, double>) {
    if (a == Algorithm::oracle) return reference::oracle_forward(p, t);
  }
  reference::chunked_forward<Real>(p, t);
}
template <class Real>
void run_backward(Algorithm a, const Params& p, const BackwardTensors<Real>& t) {
  if constexpr (std::is_same_v<Real, double>) {
    if (a == Algorithm::oracle) return reference::oracle_backward(p, t);
  }
  reference::chunked_backward<Real>(p, t);
}

template <class Real>
std::tuple<Tensor, Tensor> forward_cpu_typed(Algorithm a, const Call& c, Params p, bool final_state,
                                             at::ScalarType rt) {
  const Working w(c, rt);
  p.final_state = final_state;
  p.cu_seqlens = host_offsets(c.op, c.cu_seqlens);
  p.set_contiguous_strides();
  w.strides_into(p);
  auto [o, ht] = forward_outputs(p, c, final_state, c.q.options().dtype(rt));
  Tensor o_w = o.scalar_type() == rt ? o : at::empty(o.sizes(), o.options().dtype(rt));
  ForwardTensors<Real> t;
  t.q = ptr_or_null<Real>(w.q);
  t.k = ptr_or_null<Real>(w.k);
  t.v = ptr_or_null<Real>(w.v);
  t.g = ptr_or_null<Real>(w.g);
  t.beta = ptr_or_null<Real>(w.beta);
  t.h0 = ptr_or_null<Real>(w.h0);
  t.o = out_ptr<Real>(o_w);
  t.ht = final_state ? out_ptr<Real>(ht) : nullptr;
  translate_errors(c.op, [&] { run_forward<Real>(a, p, t); });
  if (o_w.data_ptr() != o.data_ptr()) o.copy_(o_w);
  return {o, ht};
}

std::tuple<Tensor, Tensor> forward_cpu(Algorithm a, const char* op, const Tensor& q, const Tensor& k,
                                       const Tensor& v, const OptTensor& g, const OptTensor& beta,
                                       const OptTensor& h0, const OptTensor& cu_seqlens, double scale, bool delta,
                                       std::int64_t gate, bool final_state) {
  const Call c{op, q, k, v, g, beta, h0, cu_seqlens, scale, delta, gate};
  const Params p = describe(c);
  const at::ScalarType rt = working_type(c, a);
  if (rt == at::kDouble) return forward_cpu_typed<double>(a, c, p, final_state, rt);
  return forward_cpu_typed<float>(a, c, p, final_state, rt);
}

template <class Real>
Grads backward_cpu_typed(Algorithm a, const Call& c, Params p, const Tensor& dout_in, const OptTensor& dht_in,
                         at::ScalarType rt) {
  const Working w(c, rt);
  const Tensor dout = dout_in.to(rt);
  const Tensor dht = present(dht_in) ? dht_in->to(rt) : Tensor();
  p.final_state = dht.defined();
  p.cu_seqlens = host_offsets(c.op, c.cu_seqlens);
  p.set_contiguous_strides();
  w.strides_into(p);
  p.strides.dout = token_strides(dout);
  if (dht.defined()) p.strides.dht = state_strides(dht);
  const Grads out = backward_outputs(p, c, c.q.options());
  // Gradients are computed in Real into dense buffers, then converted to each input's dtype.
  const Grads r = backward_outputs(p, c, c.q.options(), rt);
  BackwardTensors<Real> t;
  t.q = ptr_or_null<Real>(w.q);
  t.k = ptr_or_null<Real>(w.k);
  t.v = ptr_or_null<Real>(w.v);
  t.g = ptr_or_null<Real>(w.g);
  t.beta = ptr_or_null<Real>(w.beta);
  t.h0 = ptr_or_null<Real>(w.h0);
  t.dout = ptr_or_null<Real>(dout);
  t.dht = ptr_or_null<Real>(dht);
  t.dq = out_ptr<Real>(r.dq);
  t.dk = out_ptr<Real>(r.dk);
  t.dv = out_ptr<Real>(r.dv);
  t.dg = present(c.g) ? out_ptr<Real>(r.dg) : nullptr;
  t.dbeta = present(c.beta) ? out_ptr<Real>(r.dbeta) : nullptr;
  t.dh0 = present(c.h0) ? out_ptr<Real>(r.dh0) : nullptr;
  translate_errors(c.op, [&] { run_backward<Real>(a, p, t); });
  Grads res = out;
  res.dq.copy_(r.dq);
  res.dk.copy_(r.dk);
  res.dv.copy_(r.dv);
  if (present(c.g)) res.dg.copy_(r.dg);
  if (present(c.beta)) res.dbeta.copy_(r.dbeta);
  if (present(c.h0)) res.dh0.copy_(r.dh0);
  return res;
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor> backward_cpu(
    Algorithm a, const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const OptTensor& g,
    const OptTensor& beta, const OptTensor& h0, const OptTensor& cu_seqlens, const Tensor& dout,
    const OptTensor& dht, double scale, bool delta, std::int64_t gate) {
  const Call c{op, q, k, v, g, beta, h0, cu_seqlens, scale, delta, gate};
  const Params p = describe(c);
  check_backward(c, p, dout, dht);
  const at::ScalarType rt = working_type(c, a);
  if (rt == at::kDouble) return backward_cpu_typed<double>(a, c, p, dout, dht, rt).tuple();
  return backward_cpu_typed<float>(a, c, p, dout, dht, rt).tuple();
}

std::tuple<Tensor, Tensor> fwd_cpu(const Tensor& q, const Tensor& k, const Tensor& v, const OptTensor& g,
                                   const OptTensor& beta, const OptTensor& h0, const OptTensor& cu_seqlens,
                                   double scale, bool delta, std::int64_t gate, bool final_state) {
  return forward_cpu(Algorithm::chunked, "glr.fwd", q, k, v, g, beta, h0, cu_seqlens, scale, delta, gate,
                     final_state);
}
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor> bwd_cpu(
    const Tensor& q, const Tensor& k, const Tensor& v, const OptTensor& g, const OptTensor& beta,
    const OptTensor& h0, const OptTensor& cu_seqlens, const Tensor& dout, const OptTensor& dht, double scale,
    bool delta, std::int64_t gate) {
  return backward_cpu(Algorithm::chunked, "glr.bwd", q, k, v, g, beta, h0, cu_seqlens, dout, dht, scale, delta,
                      gate);
}
// fwd_save and bwd_saved on the CPU: fwd and bwd (nothing saved: the key is all 0, and bwd_saved recomputes).
std::tuple<Tensor, Tensor, Tensor, Tensor> fwd_save_cpu(const Tensor& q, const Tensor& k, const Tensor& v,
                                                        const OptTensor& g, const OptTensor& beta, const OptTensor& h0,
                                                        const OptTensor& cu_seqlens, double scale, bool delta,
                                                        std::int64_t gate, bool final_state) {
  auto [o, ht] = fwd_cpu(q, k, v, g, beta, h0, cu_seqlens, scale, delta, gate, final_state);
  return {o, ht, at::empty({0}, q.options().dtype(at::kByte)), at::zeros({cuda::kSavedKeyWords}, at::kLong)};
}
// bwd_saved where nothing is read from the saved tensors: bwd's kernel (the CPU's, and the Meta one for shapes).
template <auto kBwd>
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor> bwd_ignoring_saved(
    const Tensor& q, const Tensor& k, const Tensor& v, const OptTensor& g, const OptTensor& beta,
    const OptTensor& h0, const OptTensor& cu_seqlens, const Tensor& dout, const OptTensor& dht, double scale,
    bool delta, std::int64_t gate, const Tensor& saved, const Tensor& saved_key) {
  (void)saved;
  (void)saved_key;
  return kBwd(q, k, v, g, beta, h0, cu_seqlens, dout, dht, scale, delta, gate);
}
std::tuple<Tensor, Tensor> oracle_fwd_cpu(const Tensor& q, const Tensor& k, const Tensor& v, const OptTensor& g,
                                          const OptTensor& beta, const OptTensor& h0, const OptTensor& cu_seqlens,
                                          double scale, bool delta, std::int64_t gate, bool final_state) {
  return forward_cpu(Algorithm::oracle, "glr.oracle_fwd", q, k, v, g, beta, h0, cu_seqlens, scale, delta, gate,
                     final_state);
}
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor> oracle_bwd_cpu(
    const Tensor& q, const Tensor& k, const Tensor& v, const OptTensor& g, const OptTensor& beta,
    const OptTensor& h0, const OptTensor& cu_seqlens, const Tensor& dout, const OptTensor& dht, double scale,
    bool delta, std::int64_t gate) {
  return backward_cpu(Algorithm::oracle, "glr.oracle_bwd", q, k, v, g, beta, h0, cu_seqlens, dout, dht, scale,
                      delta, gate);
}

// ---- Meta: shapes and dtypes only, for torch.compile's fake tensors ----------------------------------

std::tuple<Tensor, Tensor> fwd_meta(const Tensor& q, const Tensor& k, const Tensor& v, const OptTensor& g,
                                    const OptTensor& beta, const OptTensor& h0, const OptTensor& cu_seqlens,
                                    double scale, bool delta, std::int64_t gate, bool final_state) {
  const Call c{"glr.fwd", q, k, v, g, beta, h0, cu_seqlens, scale, delta, gate};
  const Params p = describe(c);
  return forward_outputs(p, c, final_state, q.options());
}
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor> bwd_meta(
    const Tensor& q, const Tensor& k, const Tensor& v, const OptTensor& g, const OptTensor& beta,
    const OptTensor& h0, const OptTensor& cu_seqlens, const Tensor& dout, const OptTensor& dht, double scale,
    bool delta, std::int64_t gate) {
  const Call c{"glr.bwd", q, k, v, g, beta, h0, cu_seqlens, scale, delta, gate};
  const Params p = describe(c);
  check_backward(c, p, dout, dht);
  return backward_outputs(p, c, q.options()).tuple();
}

// ---- autograd ----------------------------------------------------------------------------------------

std::tuple<Tensor, Tensor> call_fwd(const Tensor& q, const Tensor& k, const Tensor& v, const OptTensor& g,
                                    const OptTensor& beta, const OptTensor& h0, const OptTensor& cu_seqlens,
                                    double scale, bool delta, std::int64_t gate, bool final_state) {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("glr::fwd", "").typed<decltype(fwd_cpu)>();
  return op.call(q, k, v, g, beta, h0, cu_seqlens, scale, delta, gate, final_state);
}

std::tuple<Tensor, Tensor, Tensor, Tensor> call_fwd_save(const Tensor& q, const Tensor& k, const Tensor& v,
                                                         const OptTensor& g, const OptTensor& beta, const OptTensor& h0,
                                                         const OptTensor& cu_seqlens, double scale, bool delta,
                                                         std::int64_t gate, bool final_state) {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("glr::fwd_save", "").typed<decltype(fwd_save_cpu)>();
  return op.call(q, k, v, g, beta, h0, cu_seqlens, scale, delta, gate, final_state);
}

OptTensor opt(const Tensor& t) { return t.defined() ? OptTensor(t) : OptTensor(); }

class Recurrence : public torch::autograd::Function<Recurrence> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const Tensor& q,
                                                const Tensor& k, const Tensor& v, const OptTensor& g,
                                                const OptTensor& beta, const OptTensor& h0,
                                                const OptTensor& cu_seqlens, double scale, bool delta,
                                                std::int64_t gate, bool final_state) {
    at::AutoDispatchBelowADInplaceOrView guard;
    // On CUDA, when an input needs a gradient, the forward leaves its wy outputs for the backward (glr.fwd_save:
    // o and ht word for word fwd's; the sm90 backward then skips its wy kernel, its outputs unchanged word for
    // word); saved and saved_key stay undefined otherwise (the CPU; inputs that need no gradient keep the 73 MB off).
    auto grad = [](const OptTensor& t) { return present(t) && t->requires_grad(); };
    const bool save = q.is_cuda() && (q.requires_grad() || k.requires_grad() || v.requires_grad() || grad(g) ||
                                      grad(beta) || grad(h0));
    Tensor o, ht, saved, saved_key;
    if (save)
      std::tie(o, ht, saved, saved_key) = call_fwd_save(q, k, v, g, beta, h0, cu_seqlens, scale, delta, gate, final_state);
    else
      std::tie(o, ht) = call_fwd(q, k, v, g, beta, h0, cu_seqlens, scale, delta, gate, final_state);
    ctx->save_for_backward({q, k, v, present(g) ? *g : Tensor(), present(beta) ? *beta : Tensor(),
                            present(h0) ? *h0 : Tensor(), present(cu_seqlens) ? *cu_seqlens : Tensor(), saved,
                            saved_key});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["delta"] = delta;
    ctx->saved_data["gate"] = gate;
    ctx->saved_data["final_state"] = final_state;
    if (!final_state) ctx->mark_non_differentiable({ht});
    return {o, ht};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto s = ctx->get_saved_variables();
    const Tensor &q = s[0], &k = s[1], &v = s[2];
    const bool final_state = ctx->saved_data["final_state"].toBool();
    Tensor dout = grads[0].defined() ? grads[0] : at::zeros({q.size(0), q.size(1), v.size(2), v.size(3)},
                                                            v.options());
    OptTensor dht = final_state && grads[1].defined() ? OptTensor(grads[1]) : OptTensor();
    if (dout.is_cuda()) {
      // Dense, so the tensor-core backward can take the call: the gradient of o.sum() is an expanded, stride-0
      // tensor, which only the block programs read in place.
      dout = dout.contiguous();
      if (dht.has_value()) dht = dht->contiguous();
    }
    static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("glr::bwd", "").typed<decltype(bwd_cpu)>();
    // bwd has no derivative of its own (no double backward): it runs below autograd, which also keeps
    // it off PyTorch 1.13's missing Autograd fallbacks (AutogradMeta).
    at::AutoDispatchBelowADInplaceOrView guard;
    static auto op_saved =
        c10::Dispatcher::singleton().findSchemaOrThrow("glr::bwd_saved", "").typed<decltype(bwd_ignoring_saved<bwd_cpu>)>();
    const double scale = ctx->saved_data["scale"].toDouble();
    const bool delta = ctx->saved_data["delta"].toBool();
    const std::int64_t gate = ctx->saved_data["gate"].toInt();
    auto [dq, dk, dv, dg, dbeta, dh0] =
        s[7].defined()  // the forward's saved wy outputs (CUDA)
            ? op_saved.call(q, k, v, opt(s[3]), opt(s[4]), opt(s[5]), opt(s[6]), dout, dht, scale, delta, gate, s[7], s[8])
            : op.call(q, k, v, opt(s[3]), opt(s[4]), opt(s[5]), opt(s[6]), dout, dht, scale, delta, gate);
    return {dq,
            dk,
            dv,
            s[3].defined() ? dg : Tensor(),
            s[4].defined() ? dbeta : Tensor(),
            s[5].defined() ? dh0 : Tensor(),
            Tensor(),
            Tensor(),
            Tensor(),
            Tensor(),
            Tensor()};
  }
};

std::tuple<Tensor, Tensor> recurrence_autograd(const Tensor& q, const Tensor& k, const Tensor& v,
                                               const OptTensor& g, const OptTensor& beta, const OptTensor& h0,
                                               const OptTensor& cu_seqlens, double scale, bool delta,
                                               std::int64_t gate, bool final_state) {
  auto out = Recurrence::apply(q, k, v, g, beta, h0, cu_seqlens, scale, delta, gate, final_state);
  return {out[0], out[1]};
}

// The CPU forward has one path; the arguments are checked as fwd checks them.
std::string forward_path_cpu(const Tensor& q, const Tensor& k, const Tensor& v, const OptTensor& g,
                             const OptTensor& beta, const OptTensor& h0, const OptTensor& cu_seqlens, double scale,
                             bool delta, std::int64_t gate, bool final_state) {
  (void)final_state;
  describe(Call{"glr.forward_path", q, k, v, g, beta, h0, cu_seqlens, scale, delta, gate});
  return std::string("cpu: the chunked CPU algorithm (") + (q.scalar_type() == at::kDouble ? "float64" : "float32") + ")";
}

// The CPU backward has one path; the arguments are checked as bwd checks them.
std::string backward_path_cpu(const Tensor& q, const Tensor& k, const Tensor& v, const OptTensor& g,
                              const OptTensor& beta, const OptTensor& h0, const OptTensor& cu_seqlens,
                              const Tensor& dout, const OptTensor& dht, double scale, bool delta, std::int64_t gate) {
  const Call c{"glr.backward_path", q, k, v, g, beta, h0, cu_seqlens, scale, delta, gate};
  check_backward(c, describe(c), dout, dht);
  return std::string("cpu: the chunked CPU algorithm (") + (q.scalar_type() == at::kDouble ? "float64" : "float32") + ")";
}

}  // namespace

TORCH_LIBRARY(glr, m) {
  m.def(
      "fwd(Tensor q, Tensor k, Tensor v, Tensor? g, Tensor? beta, Tensor? h0, Tensor? cu_seqlens, float scale, "
      "bool delta, int gate, bool final_state) -> (Tensor, Tensor)");
  m.def(
      "bwd(Tensor q, Tensor k, Tensor v, Tensor? g, Tensor? beta, Tensor? h0, Tensor? cu_seqlens, Tensor dout, "
      "Tensor? dht, float scale, bool delta, int gate) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)");
  // fwd that also returns the forward's saved intermediates (uint8) and their key (int64 [12], CPU), and bwd that
  // reads them (glr/glr_cuda.hpp Saved): recurrence's autograd pair on CUDA tensors.
  m.def(
      "fwd_save(Tensor q, Tensor k, Tensor v, Tensor? g, Tensor? beta, Tensor? h0, Tensor? cu_seqlens, float scale, "
      "bool delta, int gate, bool final_state) -> (Tensor, Tensor, Tensor, Tensor)");
  m.def(
      "bwd_saved(Tensor q, Tensor k, Tensor v, Tensor? g, Tensor? beta, Tensor? h0, Tensor? cu_seqlens, Tensor dout, "
      "Tensor? dht, float scale, bool delta, int gate, Tensor saved, Tensor saved_key) "
      "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)");
  m.def(
      "recurrence(Tensor q, Tensor k, Tensor v, Tensor? g, Tensor? beta, Tensor? h0, Tensor? cu_seqlens, "
      "float scale, bool delta, int gate, bool final_state) -> (Tensor, Tensor)");
  // Which kernels fwd runs for these arguments and why ("cpu: ...", "sm90: ...", "blocks: ..."): the CUDA
  // forward dispatches to the tensor-core path where it applies (glr/glr_cuda.hpp ForwardPath).
  m.def(
      "forward_path(Tensor q, Tensor k, Tensor v, Tensor? g, Tensor? beta, Tensor? h0, Tensor? cu_seqlens, "
      "float scale, bool delta, int gate, bool final_state) -> str");
  // The same for bwd ("cpu: ...", "sm90: ...", "blocks: ..."; glr/glr_cuda.hpp BackwardPath).
  m.def(
      "backward_path(Tensor q, Tensor k, Tensor v, Tensor? g, Tensor? beta, Tensor? h0, Tensor? cu_seqlens, "
      "Tensor dout, Tensor? dht, float scale, bool delta, int gate) -> str");
  m.def(
      "oracle_fwd(Tensor q, Tensor k, Tensor v, Tensor? g, Tensor? beta, Tensor? h0, Tensor? cu_seqlens, "
      "float scale, bool delta, int gate, bool final_state) -> (Tensor, Tensor)");
  m.def(
      "oracle_bwd(Tensor q, Tensor k, Tensor v, Tensor? g, Tensor? beta, Tensor? h0, Tensor? cu_seqlens, "
      "Tensor dout, Tensor? dht, float scale, bool delta, int gate) "
      "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(glr, CPU, m) {
  m.impl("fwd", fwd_cpu);
  m.impl("bwd", bwd_cpu);
  m.impl("fwd_save", fwd_save_cpu);
  m.impl("bwd_saved", bwd_ignoring_saved<bwd_cpu>);
  m.impl("oracle_fwd", oracle_fwd_cpu);
  m.impl("oracle_bwd", oracle_bwd_cpu);
  m.impl("forward_path", forward_path_cpu);
  m.impl("backward_path", backward_path_cpu);
}

TORCH_LIBRARY_IMPL(glr, Meta, m) {
  m.impl("fwd", fwd_meta);
  m.impl("bwd", bwd_meta);
  m.impl("bwd_saved", bwd_ignoring_saved<bwd_meta>);  // (fwd_save's Meta kernel: cuda_ops.cpp, which knows the saved bytes)
}

// recurrence: the Autograd kernel wraps fwd/bwd in Recurrence; below autograd (inference mode) it is fwd.
TORCH_LIBRARY_IMPL(glr, Autograd, m) { m.impl("recurrence", recurrence_autograd); }
TORCH_LIBRARY_IMPL(glr, CompositeExplicitAutograd, m) { m.impl("recurrence", call_fwd); }

}  // namespace glr::torch_ops
