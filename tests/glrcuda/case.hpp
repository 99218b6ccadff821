// tests/glrcuda/case.hpp: random glr problems for the CUDA kernels and their host emulation, in the dtypes
// and layouts of a real call, with the float64 oracle and the CPU chunked stages to compare against.
//
// Inputs are drawn as models draw them (k L2-normalised, beta = sigmoid(normal), g a negative log-decay),
// then rounded to their dtype, so the oracle computes in float64 on exactly the values the kernels read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "emu/emulate.hpp"
#include "glr/glr_cuda.hpp"
#include "glr/params.hpp"
#include "glr/reference/chunked.hpp"

namespace glr::cudatest {

using cuda::DType;

struct Shape {
  std::string name;
  std::int64_t B, T, H, HV, K, V;
  std::vector<std::int64_t> cu_seqlens;
  bool states;  // h0 and ht (and so dh0, dht)
};

struct Dtypes {
  DType x = DType::bf16;      // q, k, v, o, dout, dq, dk, dv
  DType gate = DType::f32;    // g, beta, dg, dbeta
  DType state = DType::f32;   // h0, ht, dht, dh0
};

// How the call lays its tensors out. strided: token tensors head-major ([B, H, T, D] memory order, a
// non-contiguous view of [B, T, H, D]), scalars and states with padded rows. offset: every tensor's first
// element one element past an aligned address.
struct Layout {
  bool strided = false;
  bool offset = false;
};

// One tensor in a typed buffer, laid out by (shape, strides), first element at `offset` elements.
struct HostTensor {
  DType dt = DType::f32;
  std::vector<std::int64_t> shape, strides;
  std::int64_t offset = 0;
  std::vector<double> storage;  // raw bytes (8-byte aligned)

  bool empty() const { return shape.empty(); }
  std::int64_t numel() const;
  std::size_t bytes() const { return storage.size() * sizeof(double); }
  void* data();
  const void* data() const;
  void poison();                                // every byte 0xff: NaN in each float dtype
  void write(const std::vector<double>& dense);  // row-major values into the layout (rounded to dt)
  std::vector<double> read() const;              // the layout back to row-major values
};

struct Case {
  Member member;
  Shape shape;
  Dtypes dt;
  Layout layout;
  std::uint64_t seed = 0;
  Params dense;  // contiguous strides: the oracle's view
  Params call;   // the kernels' strides
  // inputs, row-major, exactly representable in their dtypes; empty where absent
  std::vector<double> q, k, v, g, beta, h0, dout, dht;

  std::string describe() const;
};

Case make_case(Member m, const Shape& s, const Dtypes& dt, const Layout& layout, std::uint64_t seed);

struct Results {
  std::vector<double> o, ht, dq, dk, dv, dg, dbeta, dh0;
};
Results oracle(const Case& c, bool backward);

// The call's tensors in host memory, inputs written, outputs poisoned.
struct CallTensors {
  HostTensor q, k, v, g, beta, h0, dout, dht;
  HostTensor o, ht, dq, dk, dv, dg, dbeta, dh0;
  cuda::ForwardTensors forward();
  cuda::BackwardTensors backward();
  Results read(bool backward) const;
};
CallTensors make_call(const Case& c);

// ||x - ref|| / ||ref|| (NaN if x has a NaN or the sizes differ; ||x|| when ref is all zero).
double rel_err(const std::vector<double>& x, const std::vector<double>& ref);

// Which outputs of two results differ bitwise, with the count and the first index ("" when none do).
std::string diff_results(const Results& a, const Results& b);

// Each stage's workspace buffer against the CPU chunked stage in double (glr/reference/chunked.hpp).
struct StageError {
  const char* stage;
  double err;
};
template <class Acc>
std::vector<StageError> stage_errors(const Case& c, const cuda::Work<Acc>& w, bool backward);

// The unit roundoff of a dtype (2^-8 bf16, 2^-11 fp16, 2^-24 fp32, 2^-53 fp64).
double unit_roundoff(DType t);

// Fixed seeds by default; GLR_TEST_SEED=<n> draws fresh inputs (mixed with salt), printed with each case.
std::uint64_t test_seed(std::uint64_t salt);

const char* member_name(Member m);
inline constexpr Member kMembers[] = {Member::gated_deltanet, Member::deltanet, Member::mamba2, Member::retnet,
                                      Member::linear_attention};

}  // namespace glr::cudatest
