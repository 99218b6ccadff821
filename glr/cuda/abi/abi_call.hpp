// glr/cuda/abi/abi_call.hpp: one kgate_call (include/kgate/abi.h) read as a glr problem.
//
// The contracts in glr/contracts/cuda fix the order of the tensors; which ones are present follows the
// contract's attrs, exactly as glr::Params says which tensors a problem has:
//
//   attrs     delta (0/1), gate (0 none, 1 per token, 2 per head), initial_state, final_state, varlen,
//             scale, chunk (must be 64)
//   forward   inputs  q, k, v, [g], [beta], [h0], [cu_seqlens]          outputs o, [ht]
//   backward  inputs  q, k, v, [g], [beta], [h0], dout, [dht], [cu_seqlens]
//             outputs dq, dk, dv, [dg], [dbeta], [dh0]
//
// Shapes: q, k [B, T, H, K]; v, o, dout [B, T, HV, V]; g [B, T, HV] (per token) or [HV] (per head);
// beta [B, T, HV]; states [N, HV, K, V]; cu_seqlens int32 or int64 [N + 1] (then B = 1). Strides are the
// DLTensors' own (any non-negative element strides).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>

#include "glr/glr_cuda.hpp"
#include "glr/params.hpp"
#include "kgate/abi.h"

namespace glr::abi {

// A clean refusal (KGATE_REFUSED): the input is outside what this implementation takes.
struct Refused {
  std::string why;
};

struct Tensor {
  const DLTensor* t = nullptr;
  cuda::DType dtype = cuda::DType::f32;
  void* data() const { return t ? t->data : nullptr; }
};

struct Call {
  Params params;                    // strides from the DLTensors; cu_seqlens host copy only if on_host
  bool backward = false;
  Tensor q, k, v, g, beta, h0, dout, dht;
  Tensor o, ht, dq, dk, dv, dg, dbeta, dh0;
  cuda::DeviceOffsets offsets;  // where the caller's offsets live (device for kDLCUDA), int64 or int32
};

// Reads the call; throws Refused for anything that does not fit. device: the DLDeviceType every tensor
// must have. on_host: the offsets are readable here (the CPU oracle), so Params gets the host copy.
Call read_call(const kgate_call& call, bool backward, DLDeviceType device, bool on_host);

// Writes why (NUL-terminated, truncated) into call.message.
void say(const kgate_call& call, const std::string& why);

cuda::ForwardTensors forward_tensors(const Call& c);
cuda::BackwardTensors backward_tensors(const Call& c);

}  // namespace glr::abi
