// From a kgate_call to a glr problem: which argument is which tensor, the sizes they imply, and every
// check of include/kgate/abi.h's conventions, before any work. The one binder of glr's kgate entry points:
// the CPU libraries (glr/kgate/entry.cpp) and the CUDA kernels, their emulation and their oracle
// (glr/cuda/abi/) all read their calls through bind().
//
// Argument order (the contracts in glr/contracts/ list them the same way; [x] only where the attrs say):
//
//   forward   inputs  q, k, v, [g], [beta], [h0], [cu_seqlens]          outputs  o, [ht]
//   backward  inputs  q, k, v, [g], [beta], [h0], dout, [dht], [cu_seqlens]
//             outputs dq, dk, dv, [dg], [dbeta], [dh0]
//
// Shapes: q, k, dq, dk [B, T, H, K]; v, o, dout, dv [B, T, HV, V]; g, dg [B, T, HV] (gate 1) or [HV]
// (gate 2); beta, dbeta [B, T, HV]; h0, ht, dht, dh0 [N, HV, K, V]; cu_seqlens int32 or int64 [N + 1].
// Every tensor but cu_seqlens is a float tensor (f64, f32, f16, bf16); which of those an implementation
// takes is its own check. Strides are the DLTensors' own (null: row-major, as DLPack says).
//
// Attrs (by name, any order): scale; chunk (default 64); delta (0/1); gate (0 none, 1 per token,
// 2 per head); initial_state, final_state, varlen (0/1, default 0). g is present for gate != 0, beta for
// delta = 1, h0/dh0 for initial_state = 1, ht/dht for final_state = 1, cu_seqlens for varlen = 1.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "dlpack_io.hpp"
#include "glr/params.hpp"
#include "kgate/abi.h"

namespace glr::kgate_export {

// The input is valid but outside what this entry point takes (a device, an ABI version): KGATE_REFUSED.
class Refusal : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A call that is no glr problem at all (arguments missing or extra, shapes that disagree, unknown attrs, a
// problem Params::validate rejects): what bind() throws for every InvalidArgument, so every entry point
// returns KGATE_ERROR for it, whatever subset of valid problems its implementation takes.
class BadCall : public InvalidArgument {
 public:
  explicit BadCall(const InvalidArgument& e) : InvalidArgument(e) {}
};

struct Arg {
  const DLTensor* t = nullptr;  // null when the problem has no such tensor
  Elem elem = Elem::f32;
  // The first element (byte_offset applied), or null when absent.
  void* data() const { return t ? static_cast<char*>(t->data) + t->byte_offset : nullptr; }
};

// Where the implementation reads the call's tensors.
struct BindOptions {
  // Every tensor must be on this device type, and all on one device (q's device_id), else Refusal.
  DLDeviceType device = kDLCPU;
  // true: cu_seqlens is readable here; its values go into Params::cu_seqlens (the CPU algorithms).
  // false: the offsets stay where they are (the kernels read them on the device and turn an invalid set into
  // NaN outputs, glr/cuda/common/setup.hpp); Params::cu_seqlens stays empty, and cu_seqlens must be one
  // contiguous array (else Refusal). Either way bind() ends with Params::validate(pass, Backend::cpu), the
  // device case with N + 1 stand-in offsets (0, T, ..., T) in place of values it cannot read.
  bool host_offsets = true;
};

struct Bound {
  Params p;                   // strides as the caller laid the tensors out
  std::int64_t num_seqs = 0;  // N: B, or the number of packed sequences (cu_seqlens' length - 1)
  Arg q, k, v, g, beta, h0, cu_seqlens, dout, dht;
  Arg o, ht, dq, dk, dv, dg, dbeta, dh0;
};

// Throws BadCall (a glr::InvalidArgument) naming the argument, or Refusal. Reads no tensor data except
// cu_seqlens with host_offsets.
Bound bind(const kgate_call& call, Pass pass, const BindOptions& options = {});

// The attrs that describe p, as a caller passes them to bind() (its inverse for the attrs; the names live in
// binding.cpp only).
std::vector<kgate_attr> attrs_of(const Params& p);

// Writes text (NUL-terminated, truncated) into call.message.
void say(const kgate_call& call, const std::string& text);

// The body of every glr kgate entry point: runs body and maps what it throws to a kgate status, with the
// reason (one line) in call->message. Refusal: KGATE_REFUSED. BadCall (bind() rejected the call):
// KGATE_ERROR on every entry point. Any other glr::InvalidArgument (the implementation's own checks after
// bind()): `invalid`, which is KGATE_ERROR for an implementation that takes every valid problem and
// KGATE_REFUSED for one that takes a subset (the kernels: a valid problem outside their head dims, chunk,
// dtypes or alignment). Anything else: KGATE_ERROR.
template <class F>
std::int32_t guarded_entry(const kgate_call* call, std::int32_t invalid, F&& body) {
  if (call == nullptr) return KGATE_ERROR;
  try {
    body();
    return KGATE_OK;
  } catch (const Refusal& e) {
    say(*call, std::string("glr: ") + e.what());
    return KGATE_REFUSED;
  } catch (const BadCall& e) {
    say(*call, e.what());
    return KGATE_ERROR;
  } catch (const InvalidArgument& e) {
    say(*call, e.what());
    return invalid;
  } catch (const std::exception& e) {
    say(*call, e.what());
    return KGATE_ERROR;
  } catch (...) {
    say(*call, "glr: unknown error");
    return KGATE_ERROR;
  }
}

}  // namespace glr::kgate_export
