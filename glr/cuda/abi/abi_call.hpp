// glr/cuda/abi/abi_call.hpp: one kgate_call (include/kgate/abi.h) as the CUDA API's arguments.
//
// The call is read by glr's one binder (glr/kgate/binding.hpp: argument order, attrs, shapes, strides);
// this adds what the kernels' API needs on top: each tensor's pointer and cuda::DType, and the packed
// offsets as cuda::DeviceOffsets (where the caller keeps them: on the device for the kernels).
#pragma once

#include <dlpack/dlpack.h>

#include "binding.hpp"
#include "glr/glr_cuda.hpp"
#include "glr/params.hpp"
#include "kgate/abi.h"

namespace glr::abi {

using kgate_export::Refusal;

struct Tensor {
  const DLTensor* t = nullptr;
  cuda::DType dtype = cuda::DType::f32;
  void* data = nullptr;  // the first element
};

struct Call {
  Params params;  // strides from the DLTensors; no host copy of cu_seqlens (the kernels read it on the device)
  bool backward = false;
  Tensor q, k, v, g, beta, h0, dout, dht;
  Tensor o, ht, dq, dk, dv, dg, dbeta, dh0;
  cuda::DeviceOffsets offsets;  // where the caller's offsets live (device for kDLCUDA), int64 or int32
};

// Reads the call (kgate_export::bind, offsets left where they are); throws Refusal or kgate_export::BadCall.
// device: the DLDeviceType every tensor must have. The API's own setup then checks what the kernels take.
Call read_call(const kgate_call& call, bool backward, DLDeviceType device);

cuda::ForwardTensors forward_tensors(const Call& c);
cuda::BackwardTensors backward_tensors(const Call& c);

// Every glr kgate entry point behind the CUDA API: a call bind() rejects is KGATE_ERROR, as on the CPU
// libraries; a valid problem the API's checks reject (glr::InvalidArgument: head dims, chunk, dtypes,
// alignment) is KGATE_REFUSED, since the kernels take a subset of the valid problems
// (kgate_export::guarded_entry).
template <class F>
std::int32_t guarded_entry(const kgate_call* call, F&& body) {
  return kgate_export::guarded_entry(call, KGATE_REFUSED, static_cast<F&&>(body));
}

}  // namespace glr::abi
