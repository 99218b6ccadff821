// glr/torch/problem.hpp: the tensors of one glr op call, checked and described as a glr::Params.
//
// Every op (CPU, CUDA, Meta) goes through describe() first, so a bad call fails the same way on every
// device, with one line naming the op and the argument: "glr.fwd: beta: expected shape [2, 64, 4]
// (B, T, HV), got [2, 64, 2]". Values that live in tensors (the cu_seqlens offsets) are checked where
// they can be read: on the host for CPU tensors (Params::validate), on the device for CUDA ones.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>

#include "glr/params.hpp"

namespace glr::torch_ops {

using OptTensor = c10::optional<at::Tensor>;

// The gate codes of the op schemas (Gate's order): 0 none, 1 per token [B, T, HV], 2 per head [HV].
Gate gate_of(std::int64_t code, const char* op);

struct Call {
  const char* op;  // "glr.fwd", ...: every message starts with it
  const at::Tensor& q;
  const at::Tensor& k;
  const at::Tensor& v;
  const OptTensor& g;
  const OptTensor& beta;
  const OptTensor& h0;
  const OptTensor& cu_seqlens;
  double scale;
  bool delta;
  std::int64_t gate;
};

// Checks dtypes, devices, ranks and shapes of the forward's inputs and returns the problem's sizes and
// family (strides and host cu_seqlens left for the caller). Throws c10::Error with one line.
Params describe(const Call& c);

// The dtype of the states h0/ht/dht/dh0: float64 for float64 inputs (the CPU's gradcheck path), else
// float32 (the state is always kept in fp32 on the GPU).
at::ScalarType state_dtype(const at::Tensor& q);

// Shape checks of the backward's extra inputs (dout like o, dht like ht).
void check_backward(const Call& c, const Params& p, const at::Tensor& dout, const OptTensor& dht);

// Strides of a tensor as glr's stride structs (elements).
TokenStrides token_strides(const at::Tensor& t);
ScalarStrides scalar_strides(const at::Tensor& t, Gate gate);
StateStrides state_strides(const at::Tensor& t);

// Runs f, turning glr::InvalidArgument (and any std::exception) into a c10::Error prefixed by the op.
template <class F>
void translate_errors(const char* op, F&& f) {
  try {
    f();
  } catch (const c10::Error&) {
    throw;
  } catch (const std::exception& e) {
    TORCH_CHECK(false, op, ": ", e.what());
  }
}

}  // namespace glr::torch_ops
