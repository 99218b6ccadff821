// The CUDA backend: DeviceBackend on one GPU (device 0 of what CUDA_VISIBLE_DEVICES shows).
//
// - Buffers: one cudaMalloc each, [guard | payload | guard], the payload 256-byte aligned; the guard pattern
//   is the CPU backend's (drawn from TargetOptions::guard_seed and the buffer id), written and checked on the
//   device (a kernel finds the differing byte nearest the payload on each side).
// - write/read: pinned staging and a dedicated non-blocking copy stream, never the legacy default stream,
//   whose implicit synchronisation would hide a candidate that launches its work there.
// - Calls: own_stream (a non-blocking stream the backend created), null_stream (NULL is passed) or
//   staged_inputs (inputs first filled with 0xff garbage, then written on the caller's stream by a kernel that
//   waits until every invocation of the request has been called and at least kStagedMinSeconds have passed).
//   Several invocations run in flight at once, one stream each. Outputs are captured by device-to-device copies
//   on the copy stream that wait (by event) for the caller's stream alone, so work a candidate left on another
//   stream is caught unfinished; only then does the backend synchronise the device.
// - Any CUDA error during a call (sticky or not) ends it as CallOutcome::crashed, detail "cudaErrorX: text".
//   After a sticky error the context is gone: every later method throws TargetError.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "kgate/targets.hpp"

namespace kgate {

// How long the staged-inputs kernel holds the inputs back at least, and at most (when the host never
// releases it, e.g. a callee that synchronises inside its call).
inline constexpr double kStagedMinSeconds = 0.005;
inline constexpr double kStagedMaxSeconds = 0.25;

// Throws TargetError when there is no usable CUDA device (the message says what CUDA answered).
// Sets CUDA_MODULE_LOADING=EAGER unless the environment already chose, before CUDA starts: with lazy
// loading, a candidate's first launch may wait for the staged-inputs kernel, which waits for the host.
std::unique_ptr<DeviceBackend> make_cuda_backend(const TargetOptions& options);

// Whether this process can use a CUDA device; if not and why is non-null, the reason (for tests that skip).
bool cuda_device_available(std::string* why = nullptr);
// Initialises the CUDA driver and device 0's primary context when this machine has an NVIDIA device node,
// quietly doing nothing otherwise: the worker calls it before it sandboxes itself.
void initialise_cuda_if_present();

}  // namespace kgate
