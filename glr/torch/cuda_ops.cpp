// The CUDA kernels of glr::fwd and glr::bwd: today's glr CUDA forward and backward (glr/glr_cuda.hpp) on the
// tensors' own strides, the current CUDA stream and a workspace from PyTorch's caching allocator. Built
// only when the extension is built with CUDA (GLR_TORCH_CUDA); the CPU build never sees this file's body.
//
// What the CUDA kernels take (glr_cuda.hpp): q, k, v in bf16 or fp16; g, beta in fp32 or q's dtype; states
// fp32; K, V in {64, 128}; chunk 64. Anything else fails with glr's one-line InvalidArgument, prefixed by the
// op. Packed sequences: the offsets stay on the device (int64 or int32) and are checked there; invalid ones
// turn every output into NaN instead of a host synchronisation (glr_cuda.hpp).
#ifdef GLR_TORCH_CUDA

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <string>

#include "glr/glr_cuda.hpp"
#include "problem.hpp"

namespace glr::torch_ops {
namespace {

using at::Tensor;

bool present(const OptTensor& t) { return t.has_value() && t->defined(); }

cuda::DType dtype_of(const char* op, const char* name, const Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return cuda::DType::f32;
    case at::kHalf: return cuda::DType::f16;
    case at::kBFloat16: return cuda::DType::bf16;
    default: TORCH_CHECK(false, op, ": ", name, ": dtype ", t.scalar_type(), " is not supported by the CUDA kernels");
  }
  return cuda::DType::f32;
}

cuda::In in(const char* op, const char* name, const OptTensor& t) {
  if (!present(t) || t->numel() == 0) return {nullptr, present(t) ? dtype_of(op, name, *t) : cuda::DType::bf16};
  return {t->data_ptr(), dtype_of(op, name, *t)};
}
cuda::Out out(const char* op, const char* name, const Tensor& t, bool used) {
  if (!used || t.numel() == 0) return {nullptr, dtype_of(op, name, t)};
  return {t.data_ptr(), dtype_of(op, name, t)};
}

cuda::DeviceOffsets offsets(const char* op, const OptTensor& cu) {
  cuda::DeviceOffsets d;
  if (!present(cu)) return d;
  TORCH_CHECK(cu->is_contiguous(), op, ": cu_seqlens: must be contiguous");
  d.num_seqs = cu->size(0) - 1;
  if (cu->scalar_type() == at::kLong)
    d.cu_seqlens = cu->data_ptr<std::int64_t>();
  else
    d.cu_seqlens32 = cu->data_ptr<std::int32_t>();
  return d;
}

Tensor workspace(std::size_t bytes, const Tensor& like) {
  return at::empty({static_cast<std::int64_t>(bytes > 0 ? bytes : 1)}, like.options().dtype(at::kByte));
}

// One forward call as glr's CUDA API takes it: the problem (the inputs' own strides, dense outputs), the
// outputs allocated, the tensors and the device offsets. Shared by glr.fwd and glr.forward_path.
struct ForwardCall {
  Params p;
  Tensor o, ht;
  cuda::ForwardTensors t;
  cuda::DeviceOffsets d;
};
ForwardCall forward_call(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const OptTensor& g,
                         const OptTensor& beta, const OptTensor& h0, const OptTensor& cu_seqlens, double scale,
                         bool delta, std::int64_t gate, bool final_state) {
  const Call c{op, q, k, v, g, beta, h0, cu_seqlens, scale, delta, gate};
  ForwardCall f;
  Params& p = f.p;
  p = describe(c);
  p.final_state = final_state;
  p.set_contiguous_strides();  // the outputs' (dense) strides; the inputs' are set below
  p.strides.q = token_strides(q);
  p.strides.k = token_strides(k);
  p.strides.v = token_strides(v);
  if (present(g)) p.strides.g = scalar_strides(*g, p.gate);
  if (present(beta)) p.strides.beta = scalar_strides(*beta, Gate::per_token);
  if (present(h0)) p.strides.h0 = state_strides(*h0);
  const std::int64_t N = present(cu_seqlens) ? cu_seqlens->size(0) - 1 : p.B;
  // The outputs are allocated for glr.forward_path too: the choice depends on their dtypes and alignment.
  f.o = at::empty({p.B, p.T, p.HV, p.V}, v.options());
  f.ht = final_state ? at::empty({N, p.HV, p.K, p.V}, q.options().dtype(at::kFloat))
                     : at::empty({0}, q.options().dtype(at::kFloat));
  if (final_state) p.strides.ht = state_strides(f.ht);
  f.t = cuda::ForwardTensors{in(op, "q", q),         in(op, "k", k),       in(op, "v", v),
                             in(op, "g", g),         in(op, "beta", beta), in(op, "h0", h0),
                             out(op, "o", f.o, true), out(op, "ht", f.ht, final_state)};
  f.d = offsets(op, cu_seqlens);
  return f;
}

// Which kernels glr.fwd runs for these arguments, and why: "sm90: ..." or "blocks: ..." (glr_cuda.hpp
// ForwardPath; GLR_FORWARD_PATH=blocks forces the block programs).
std::string forward_path_cuda(const Tensor& q, const Tensor& k, const Tensor& v, const OptTensor& g,
                              const OptTensor& beta, const OptTensor& h0, const OptTensor& cu_seqlens, double scale,
                              bool delta, std::int64_t gate, bool final_state) {
  const char* op = "glr.forward_path";
  const c10::cuda::CUDAGuard guard(q.device());
  const ForwardCall f = forward_call(op, q, k, v, g, beta, h0, cu_seqlens, scale, delta, gate, final_state);
  std::string r;
  translate_errors(op, [&] {
    const cuda::ForwardChoice c = cuda::forward_path(f.p, f.t, f.d);
    r = std::string(cuda::name_of(c.path)) + ": " + c.reason;
  });
  return r;
}

std::tuple<Tensor, Tensor> fwd_cuda(const Tensor& q, const Tensor& k, const Tensor& v, const OptTensor& g,
                                    const OptTensor& beta, const OptTensor& h0, const OptTensor& cu_seqlens,
                                    double scale, bool delta, std::int64_t gate, bool final_state) {
  const char* op = "glr.fwd";
  const c10::cuda::CUDAGuard guard(q.device());
  const ForwardCall f = forward_call(op, q, k, v, g, beta, h0, cu_seqlens, scale, delta, gate, final_state);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(q.device().index()).stream();
  translate_errors(op, [&] {
    // The workspace of the path forward() takes (the sm90 path's is a fraction of the block programs').
    const cuda::ForwardPath path = cuda::forward_path(f.p, f.t, f.d).path;
    Tensor ws = workspace(cuda::forward_workspace_bytes(f.p, f.d, path), q);
    cuda::forward(f.p, f.t, f.d, ws.data_ptr(), static_cast<std::size_t>(ws.numel()), stream);
  });
  return {f.o, f.ht};
}

// glr.fwd_save: glr.fwd that also returns the forward's saved intermediates for glr.bwd_saved (glr_cuda.hpp Saved):
// a uint8 tensor of cuda::saved_bytes (the same size whichever path runs, so the Meta kernel below can say it; the
// block programs leave it unused) and its key, int64 [kSavedKeyWords] on the CPU (all 0: nothing saved, the
// backward recomputes).
std::tuple<Tensor, Tensor, Tensor, Tensor> fwd_save_cuda(const Tensor& q, const Tensor& k, const Tensor& v,
                                                         const OptTensor& g, const OptTensor& beta, const OptTensor& h0,
                                                         const OptTensor& cu_seqlens, double scale, bool delta,
                                                         std::int64_t gate, bool final_state) {
  const char* op = "glr.fwd_save";
  const c10::cuda::CUDAGuard guard(q.device());
  const ForwardCall f = forward_call(op, q, k, v, g, beta, h0, cu_seqlens, scale, delta, gate, final_state);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(q.device().index()).stream();
  Tensor saved, key = at::zeros({cuda::kSavedKeyWords}, at::TensorOptions().dtype(at::kLong));
  translate_errors(op, [&] {
    const cuda::ForwardPath path = cuda::forward_path(f.p, f.t, f.d).path;
    Tensor ws = workspace(cuda::forward_workspace_bytes(f.p, f.d, path), q);
    saved = workspace(cuda::saved_bytes(f.p, f.d), q);
    cuda::Saved s{saved.data_ptr(), static_cast<std::size_t>(saved.numel())};
    cuda::ForwardOptions options;
    options.save = &s;
    cuda::forward(f.p, f.t, f.d, ws.data_ptr(), static_cast<std::size_t>(ws.numel()), stream, options);
    std::copy(std::begin(s.key), std::end(s.key), key.data_ptr<std::int64_t>());
  });
  return {f.o, f.ht, saved, key};
}

// fwd_save's shapes for torch.compile's fake tensors: fwd's, the saved bytes (sizes only) and the key.
std::tuple<Tensor, Tensor, Tensor, Tensor> fwd_save_meta(const Tensor& q, const Tensor& k, const Tensor& v,
                                                         const OptTensor& g, const OptTensor& beta, const OptTensor& h0,
                                                         const OptTensor& cu_seqlens, double scale, bool delta,
                                                         std::int64_t gate, bool final_state) {
  const char* op = "glr.fwd_save";
  const Call c{op, q, k, v, g, beta, h0, cu_seqlens, scale, delta, gate};
  Params p = describe(c);
  p.set_contiguous_strides();  // sizes only: the strides do not change the saved bytes
  const std::int64_t N = present(cu_seqlens) ? cu_seqlens->size(0) - 1 : p.B;
  Tensor o = at::empty({p.B, p.T, p.HV, p.V}, v.options());
  Tensor ht = final_state ? at::empty({N, p.HV, p.K, p.V}, q.options().dtype(at::kFloat)) : at::empty({0}, q.options().dtype(at::kFloat));
  cuda::DeviceOffsets d;
  static const std::int64_t stand_in[1] = {0};  // only the offsets' count and alignment are read for the sizes
  if (present(cu_seqlens)) {
    d.num_seqs = N;
    d.cu_seqlens = stand_in;
  }
  std::size_t bytes = 0;
  translate_errors(op, [&] { bytes = cuda::saved_bytes(p, d); });
  Tensor saved = at::empty({static_cast<std::int64_t>(bytes > 0 ? bytes : 1)}, q.options().dtype(at::kByte));
  return {o, ht, saved, at::empty({cuda::kSavedKeyWords}, at::TensorOptions().device(at::kMeta).dtype(at::kLong))};
}

// One backward call as glr's CUDA API takes it (as ForwardCall): the problem, the gradients allocated, the
// tensors and the device offsets. Shared by glr.bwd and glr.backward_path.
struct BackwardCall {
  Params p;
  Tensor dq, dk, dv, dg, dbeta, dh0;
  cuda::BackwardTensors t;
  cuda::DeviceOffsets d;
};
BackwardCall backward_call(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const OptTensor& g,
                           const OptTensor& beta, const OptTensor& h0, const OptTensor& cu_seqlens,
                           const Tensor& dout, const OptTensor& dht, double scale, bool delta, std::int64_t gate) {
  const Call c{op, q, k, v, g, beta, h0, cu_seqlens, scale, delta, gate};
  BackwardCall b;
  Params& p = b.p;
  p = describe(c);
  check_backward(c, p, dout, dht);
  p.final_state = present(dht);
  p.set_contiguous_strides();  // the outputs' (dense) strides; the inputs' are set below
  p.strides.q = token_strides(q);
  p.strides.k = token_strides(k);
  p.strides.v = token_strides(v);
  p.strides.dout = token_strides(dout);
  if (present(g)) p.strides.g = scalar_strides(*g, p.gate);
  if (present(beta)) p.strides.beta = scalar_strides(*beta, Gate::per_token);
  if (present(h0)) p.strides.h0 = state_strides(*h0);
  if (present(dht)) p.strides.dht = state_strides(*dht);
  const std::int64_t N = present(cu_seqlens) ? cu_seqlens->size(0) - 1 : p.B;
  const auto x = q.options();
  // Outputs are dense: set_contiguous_strides already describes them. They are allocated for glr.backward_path
  // too: the choice depends on their dtypes and alignment.
  b.dq = at::empty({p.B, p.T, p.H, p.K}, x);
  b.dk = at::empty({p.B, p.T, p.H, p.K}, x);
  b.dv = at::empty({p.B, p.T, p.HV, p.V}, x);
  b.dg = present(g) ? at::empty(g->sizes(), g->options()) : at::empty({0}, x);
  b.dbeta = present(beta) ? at::empty(beta->sizes(), beta->options()) : at::empty({0}, x);
  b.dh0 = present(h0) ? at::empty({N, p.HV, p.K, p.V}, x.dtype(at::kFloat)) : at::empty({0}, x);
  b.t = cuda::BackwardTensors{in(op, "q", q),
                              in(op, "k", k),
                              in(op, "v", v),
                              in(op, "g", g),
                              in(op, "beta", beta),
                              in(op, "h0", h0),
                              in(op, "dout", dout),
                              in(op, "dht", dht),
                              out(op, "dq", b.dq, true),
                              out(op, "dk", b.dk, true),
                              out(op, "dv", b.dv, true),
                              out(op, "dg", b.dg, present(g)),
                              out(op, "dbeta", b.dbeta, present(beta)),
                              out(op, "dh0", b.dh0, present(h0))};
  b.d = offsets(op, cu_seqlens);
  return b;
}

// Which kernels glr.bwd runs for these arguments, and why: "sm90: ..." or "blocks: ..." (glr_cuda.hpp
// BackwardPath; GLR_BACKWARD_PATH=blocks forces the block programs).
std::string backward_path_cuda(const Tensor& q, const Tensor& k, const Tensor& v, const OptTensor& g,
                               const OptTensor& beta, const OptTensor& h0, const OptTensor& cu_seqlens,
                               const Tensor& dout, const OptTensor& dht, double scale, bool delta,
                               std::int64_t gate) {
  const char* op = "glr.backward_path";
  const c10::cuda::CUDAGuard guard(q.device());
  const BackwardCall b = backward_call(op, q, k, v, g, beta, h0, cu_seqlens, dout, dht, scale, delta, gate);
  std::string r;
  translate_errors(op, [&] {
    const cuda::BackwardChoice c = cuda::backward_path(b.p, b.t, b.d);
    r = std::string(cuda::name_of(c.path)) + ": " + c.reason;
  });
  return r;
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor> bwd_cuda(
    const Tensor& q, const Tensor& k, const Tensor& v, const OptTensor& g, const OptTensor& beta,
    const OptTensor& h0, const OptTensor& cu_seqlens, const Tensor& dout, const OptTensor& dht, double scale,
    bool delta, std::int64_t gate) {
  const char* op = "glr.bwd";
  const c10::cuda::CUDAGuard guard(q.device());
  const BackwardCall b = backward_call(op, q, k, v, g, beta, h0, cu_seqlens, dout, dht, scale, delta, gate);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(q.device().index()).stream();
  translate_errors(op, [&] {
    // The workspace of the path backward() takes (the sm90 path's is about a quarter of the block programs').
    const cuda::BackwardPath path = cuda::backward_path(b.p, b.t, b.d).path;
    Tensor ws = workspace(cuda::backward_workspace_bytes(b.p, b.d, path), q);
    cuda::backward(b.p, b.t, b.d, ws.data_ptr(), static_cast<std::size_t>(ws.numel()), stream);
  });
  return {b.dq, b.dk, b.dv, b.dg, b.dbeta, b.dh0};
}

// glr.bwd_saved: glr.bwd given fwd_save's saved tensor and key (cuda::BackwardOptions::saved): the same outputs, word
// for word, without recomputing the forward's wy outputs on the sm90 path; a key of another problem is refused.
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor> bwd_saved_cuda(
    const Tensor& q, const Tensor& k, const Tensor& v, const OptTensor& g, const OptTensor& beta,
    const OptTensor& h0, const OptTensor& cu_seqlens, const Tensor& dout, const OptTensor& dht, double scale,
    bool delta, std::int64_t gate, const Tensor& saved, const Tensor& saved_key) {
  const char* op = "glr.bwd_saved";
  const c10::cuda::CUDAGuard guard(q.device());
  TORCH_CHECK(saved.is_cuda() && saved.scalar_type() == at::kByte && saved.is_contiguous(), op,
              ": saved: expected the contiguous uint8 CUDA tensor of glr.fwd_save");
  TORCH_CHECK(saved_key.device().is_cpu() && saved_key.scalar_type() == at::kLong &&
                  saved_key.numel() == cuda::kSavedKeyWords && saved_key.is_contiguous(),
              op, ": saved_key: expected the int64 CPU tensor [", cuda::kSavedKeyWords, "] of glr.fwd_save");
  const BackwardCall b = backward_call(op, q, k, v, g, beta, h0, cu_seqlens, dout, dht, scale, delta, gate);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(q.device().index()).stream();
  translate_errors(op, [&] {
    const cuda::BackwardPath path = cuda::backward_path(b.p, b.t, b.d).path;
    Tensor ws = workspace(cuda::backward_workspace_bytes(b.p, b.d, path), q);
    cuda::Saved s{saved.data_ptr(), static_cast<std::size_t>(saved.numel())};
    std::copy(saved_key.data_ptr<std::int64_t>(), saved_key.data_ptr<std::int64_t>() + cuda::kSavedKeyWords, s.key);
    cuda::BackwardOptions options;
    options.saved = &s;
    cuda::backward(b.p, b.t, b.d, ws.data_ptr(), static_cast<std::size_t>(ws.numel()), stream, options);
  });
  return {b.dq, b.dk, b.dv, b.dg, b.dbeta, b.dh0};
}

}  // namespace

TORCH_LIBRARY_IMPL(glr, CUDA, m) {
  m.impl("fwd_save", fwd_save_cuda);
  m.impl("bwd_saved", bwd_saved_cuda);
  m.impl("fwd", fwd_cuda);
  m.impl("bwd", bwd_cuda);
  m.impl("forward_path", forward_path_cuda);
  m.impl("backward_path", backward_path_cuda);
}
// fwd_save's Meta kernel lives here: the saved tensor's size is glr's CUDA API's (cuda::saved_bytes).
TORCH_LIBRARY_IMPL(glr, Meta, m) { m.impl("fwd_save", fwd_save_meta); }

}  // namespace glr::torch_ops

#endif  // GLR_TORCH_CUDA
