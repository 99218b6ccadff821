// glr's kgate libraries through the C ABI, loaded as kgate loads them (dlopen): kgate_run is the chunked
// float algorithm bit for bit, kgate_oracle the float64 recurrence bit for bit, strided views are read
// and written correctly, and every bad call returns KGATE_ERROR (or KGATE_REFUSED) with a message naming
// the argument, outputs untouched.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "binding.hpp"
#include "kgate/abi.h"
#include "problem.hpp"

namespace glr::test {
namespace {

struct Library {
  void* handle = nullptr;
  kgate_entry_fn run = nullptr, run_bf16 = nullptr, oracle = nullptr;
  explicit Library(const char* path) {
    handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) return;
    run = reinterpret_cast<kgate_entry_fn>(dlsym(handle, "kgate_run"));
    run_bf16 = reinterpret_cast<kgate_entry_fn>(dlsym(handle, "kgate_run_bf16"));
    oracle = reinterpret_cast<kgate_entry_fn>(dlsym(handle, "kgate_oracle"));
  }
  ~Library() {
    if (handle) dlclose(handle);
  }
};

Library& forward_lib() {
  static Library lib(GLR_KGATE_FWD_PATH);
  return lib;
}
Library& backward_lib() {
  static Library lib(GLR_KGATE_BWD_PATH);
  return lib;
}

// A tensor argument: owns its values (f32 or f64), shape and strides.
struct Tensor {
  std::vector<std::int64_t> shape, strides;
  std::vector<float> f32;
  std::vector<double> f64;
  std::vector<std::int32_t> i32;
  DLTensor t{};

  static Tensor of(const std::vector<double>& values, std::vector<std::int64_t> shape, bool as_f64) {
    Tensor x;
    x.shape = std::move(shape);
    x.strides.assign(x.shape.size(), 1);
    for (int d = static_cast<int>(x.shape.size()) - 2; d >= 0; --d)
      x.strides[static_cast<std::size_t>(d)] = x.strides[static_cast<std::size_t>(d) + 1] * x.shape[static_cast<std::size_t>(d) + 1];
    if (as_f64) x.f64 = values;
    else x.f32.assign(values.begin(), values.end());
    return x;
  }
  static Tensor offsets(const std::vector<std::int64_t>& cu) {
    Tensor x;
    x.shape = {static_cast<std::int64_t>(cu.size())};
    x.strides = {1};
    x.i32.assign(cu.begin(), cu.end());
    return x;
  }
  DLTensor& dl() {
    t = DLTensor{};
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<int>(shape.size());
    t.shape = shape.data();
    t.strides = strides.data();
    if (!i32.empty()) t.data = i32.data(), t.dtype = {kDLInt, 32, 1};
    else if (!f64.empty()) t.data = f64.data(), t.dtype = {kDLFloat, 64, 1};
    else t.data = f32.data(), t.dtype = {kDLFloat, 32, 1};
    return t;
  }
  std::vector<double> values() const {
    return f64.empty() ? std::vector<double>(f32.begin(), f32.end()) : f64;
  }
};

using kgate_export::attrs_of;  // the binder's inverse: the attrs a caller passes

// The forward call of a problem, tensors in binding.hpp's order.
struct ForwardCall {
  std::vector<Tensor> in, out;
  std::vector<kgate_attr> attrs;
  std::vector<DLTensor> in_dl, out_dl;
  char message[512] = {};

  ForwardCall(const Problem& pr, bool f64) {
    const Params& p = pr.p;
    const std::int64_t B = p.B, T = p.T, N = p.num_seqs();
    in.push_back(Tensor::of(pr.q, {B, T, p.H, p.K}, f64));
    in.push_back(Tensor::of(pr.k, {B, T, p.H, p.K}, f64));
    in.push_back(Tensor::of(pr.v, {B, T, p.HV, p.V}, f64));
    if (p.gate == Gate::per_token) in.push_back(Tensor::of(pr.g, {B, T, p.HV}, f64));
    if (p.gate == Gate::per_head) in.push_back(Tensor::of(pr.g, {p.HV}, f64));
    if (p.delta) in.push_back(Tensor::of(pr.beta, {B, T, p.HV}, f64));
    if (p.initial_state) in.push_back(Tensor::of(pr.h0, {N, p.HV, p.K, p.V}, f64));
    if (p.varlen()) in.push_back(Tensor::offsets(p.cu_seqlens));
    out.push_back(Tensor::of(std::vector<double>(static_cast<std::size_t>(B * T * p.HV * p.V), -7.0), {B, T, p.HV, p.V}, f64));
    if (p.final_state) out.push_back(Tensor::of(std::vector<double>(static_cast<std::size_t>(N * p.HV * p.K * p.V), -7.0), {N, p.HV, p.K, p.V}, f64));
    attrs = attrs_of(p);
  }
  kgate_call call() {
    in_dl.clear();
    out_dl.clear();
    for (Tensor& t : in) in_dl.push_back(t.dl());
    for (Tensor& t : out) out_dl.push_back(t.dl());
    kgate_call c{};
    c.abi_version = KGATE_ABI_VERSION;
    c.n_inputs = static_cast<int32_t>(in_dl.size());
    c.n_outputs = static_cast<int32_t>(out_dl.size());
    c.n_attrs = static_cast<int32_t>(attrs.size());
    c.inputs = in_dl.data();
    c.outputs = out_dl.data();
    c.attrs = attrs.data();
    c.message = message;
    c.message_capacity = sizeof message;
    return c;
  }
};

Problem problem(Member m, std::vector<std::int64_t> cu = {}) {
  const std::int64_t B = cu.empty() ? 2 : 1, T = cu.empty() ? 21 : cu.back();
  return random_problem(make_params(m, B, T, 1, 2, 8, 4, cu, true, true, 8), test_seed(500));
}

TEST(GlrKgateExport, LibrariesLoadAndExportTheEntryPoints) {
  for (Library* lib : {&forward_lib(), &backward_lib()}) {
    ASSERT_NE(lib->handle, nullptr) << dlerror();
    EXPECT_NE(lib->run, nullptr);
    EXPECT_NE(lib->run_bf16, nullptr);
    EXPECT_NE(lib->oracle, nullptr);
  }
}

TEST(GlrKgateExport, ForwardIsTheChunkedAlgorithmAndTheOracle) {
  for (Member m : {Member::gated_deltanet, Member::retnet, Member::linear_attention})
    for (const std::vector<std::int64_t>& cu : {std::vector<std::int64_t>{}, std::vector<std::int64_t>{0, 6, 6, 19}}) {
      const Problem pr = problem(m, cu);
      ForwardCall run(pr, false), oracle(pr, true);
      kgate_call c = run.call();
      ASSERT_EQ(forward_lib().run(&c), KGATE_OK) << run.message;
      c = oracle.call();
      ASSERT_EQ(forward_lib().oracle(&c), KGATE_OK) << oracle.message;
      const Outputs want = chunked_forward<float>(pr), exact = oracle_forward(pr);
      EXPECT_EQ(run.out[0].values(), want.o) << name_of(m);
      EXPECT_EQ(run.out[1].values(), want.ht) << name_of(m);
      EXPECT_EQ(oracle.out[0].values(), exact.o) << name_of(m);
      EXPECT_EQ(oracle.out[1].values(), exact.ht) << name_of(m);
    }
}

TEST(GlrKgateExport, BackwardIsTheChunkedAlgorithm) {
  const Problem pr = problem(Member::gated_deltanet, {0, 9, 9, 17});
  ForwardCall call(pr, false);  // the forward inputs, then dout and dht before cu_seqlens
  const Params& p = pr.p;
  const std::int64_t N = p.num_seqs();
  Tensor cu = call.in.back();
  call.in.pop_back();
  call.in.push_back(Tensor::of(pr.dout, {p.B, p.T, p.HV, p.V}, false));
  call.in.push_back(Tensor::of(pr.dht, {N, p.HV, p.K, p.V}, false));
  call.in.push_back(cu);
  call.out.clear();
  auto zeros = [](std::vector<std::int64_t> s) {
    std::int64_t n = 1;
    for (auto d : s) n *= d;
    return Tensor::of(std::vector<double>(static_cast<std::size_t>(n), -7.0), s, false);
  };
  call.out = {zeros({p.B, p.T, p.H, p.K}), zeros({p.B, p.T, p.H, p.K}), zeros({p.B, p.T, p.HV, p.V}),
              zeros({p.B, p.T, p.HV}), zeros({p.B, p.T, p.HV}), zeros({N, p.HV, p.K, p.V})};
  kgate_call c = call.call();
  ASSERT_EQ(backward_lib().run(&c), KGATE_OK) << call.message;
  const Grads want = chunked_backward<float>(pr);
  EXPECT_EQ(call.out[0].values(), want.dq);
  EXPECT_EQ(call.out[1].values(), want.dk);
  EXPECT_EQ(call.out[2].values(), want.dv);
  EXPECT_EQ(call.out[3].values(), want.dg);
  EXPECT_EQ(call.out[4].values(), want.dbeta);
  EXPECT_EQ(call.out[5].values(), want.dh0);
}

// A transposed view of v ([B, T, HV, V] stored as [B, HV, T, V]) and a padded o give the dense bits.
TEST(GlrKgateExport, StridedViewsAreHonoured) {
  const Problem pr = problem(Member::mamba2);
  ForwardCall dense(pr, false), strided(pr, false);
  const Params& p = pr.p;
  Tensor& v = strided.in[2];
  std::vector<float> permuted(v.f32.size());
  for (std::int64_t b = 0; b < p.B; ++b)
    for (std::int64_t t = 0; t < p.T; ++t)
      for (std::int64_t h = 0; h < p.HV; ++h)
        for (std::int64_t e = 0; e < p.V; ++e)
          permuted[static_cast<std::size_t>(((b * p.HV + h) * p.T + t) * p.V + e)] =
              v.f32[static_cast<std::size_t>(((b * p.T + t) * p.HV + h) * p.V + e)];
  v.f32 = permuted;
  v.strides = {p.HV * p.T * p.V, p.V, p.T * p.V, 1};
  Tensor& o = strided.out[0];
  o.f32.assign(static_cast<std::size_t>(p.B * p.T * p.HV * (p.V + 3)), -7.0f);
  o.strides = {p.T * p.HV * (p.V + 3), p.HV * (p.V + 3), p.V + 3, 1};
  kgate_call c = dense.call();
  ASSERT_EQ(forward_lib().run(&c), KGATE_OK) << dense.message;
  c = strided.call();
  ASSERT_EQ(forward_lib().run(&c), KGATE_OK) << strided.message;
  for (std::int64_t r = 0; r < p.B * p.T * p.HV; ++r)
    for (std::int64_t e = 0; e < p.V + 3; ++e) {
      const float got = o.f32[static_cast<std::size_t>(r * (p.V + 3) + e)];
      if (e < p.V) EXPECT_EQ(got, dense.out[0].f32[static_cast<std::size_t>(r * p.V + e)]);
      else EXPECT_EQ(got, -7.0f) << "padding written";
    }
}

void expect_error(ForwardCall& call, int32_t want, const std::string& fragment) {
  kgate_call c = call.call();
  EXPECT_EQ(forward_lib().run(&c), want) << call.message;
  EXPECT_NE(std::string(call.message).find(fragment), std::string::npos) << call.message;
  for (const Tensor& t : call.out)
    for (float x : t.f32) ASSERT_EQ(x, -7.0f) << "an output was written by a failing call";
}

TEST(GlrKgateExport, BadCallsAreNamedAndWriteNothing) {
  const Problem pr = problem(Member::gated_deltanet, {0, 6, 6, 19});
  {
    ForwardCall c(pr, false);
    c.in.pop_back();  // cu_seqlens missing
    expect_error(c, KGATE_ERROR, "cu_seqlens");
  }
  {
    ForwardCall c(pr, false);
    c.in[1].shape[3] = 4, c.in[1].f32.resize(c.in[1].f32.size() / 2);  // k with K = 4, q with K = 8
    c.in[1].strides = {19 * 4, 4, 4, 1};
    expect_error(c, KGATE_ERROR, "k: shape [1, 19, 1, 4] does not match q's [1, 19, 1, 8]");
  }
  {
    ForwardCall c(pr, false);
    c.in.back().i32 = {0, 7, 6, 19};
    expect_error(c, KGATE_ERROR, "cu_seqlens: offsets must be non-decreasing");
  }
  {
    ForwardCall c(pr, false);
    c.attrs.push_back({"sclae", 1.0});
    expect_error(c, KGATE_ERROR, "unknown attr \"sclae\"");
  }
  {
    ForwardCall c(pr, false);
    c.attrs[2].value = 0;  // delta off: beta is one tensor too many
    expect_error(c, KGATE_ERROR, "inputs: too many");
  }
  {
    ForwardCall c(pr, false);
    c.out[0].strides = {0, 0, 0, 1};  // o overlapping itself
    expect_error(c, KGATE_ERROR, "strides.o");
  }
  {
    ForwardCall c(pr, false);
    kgate_call k = c.call();
    c.in_dl[0].device.device_type = kDLCUDA;
    EXPECT_EQ(forward_lib().run(&k), KGATE_REFUSED);
    EXPECT_NE(std::string(c.message).find("CPU only"), std::string::npos) << c.message;
  }
}

}  // namespace
}  // namespace glr::test
