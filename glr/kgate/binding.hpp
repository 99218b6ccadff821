// From a kgate_call to a glr problem: which argument is which tensor, the sizes they imply, and every
// check of include/kgate/abi.h's conventions, before any work.
//
// Argument order (the contracts in glr/contracts/ list them the same way; [x] only where the attrs say):
//
//   forward   inputs  q, k, v, [g], [beta], [h0], [cu_seqlens]          outputs  o, [ht]
//   backward  inputs  q, k, v, [g], [beta], [h0], dout, [dht], [cu_seqlens]
//             outputs dq, dk, dv, [dg], [dbeta], [dh0]
//
// Attrs (by name, any order): scale; chunk (default 64); delta (0/1); gate (0 none, 1 per token,
// 2 per head); initial_state, final_state, varlen (0/1, default 0). g is present for gate != 0, beta for
// delta = 1, h0/dh0 for initial_state = 1, ht/dht for final_state = 1, cu_seqlens for varlen = 1.
#pragma once

#include <string>

#include "dlpack_io.hpp"
#include "glr/params.hpp"
#include "kgate/abi.h"

namespace glr::kgate_export {

// The input is valid but outside what this entry point takes (a device, a dtype): KGATE_REFUSED.
class Refusal : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Arg {
  const DLTensor* t = nullptr;  // null when the problem has no such tensor
  Elem elem = Elem::f32;
};

struct Bound {
  Params p;  // strides as the caller laid the tensors out
  Arg q, k, v, g, beta, h0, cu_seqlens, dout, dht;
  Arg o, ht, dq, dk, dv, dg, dbeta, dh0;
};

// Throws glr::InvalidArgument naming the argument (KGATE_ERROR) or Refusal (KGATE_REFUSED).
Bound bind(const kgate_call& call, Pass pass);

}  // namespace glr::kgate_export
