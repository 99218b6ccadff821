// The worker process's side of the protocol: load one library, then serve buffers and calls with a
// DeviceBackend until the driver says quit or goes away.
//
// It lives in kgate_core so tests and tools share it; the executable (tools/kgate_worker.cpp) only
// chooses the backend, because the CUDA backend is a separate library only the executable links.
#pragma once

#include <functional>
#include <memory>

#include "backend/backend.hpp"

namespace kgate {

// Returns the backend for the device the library named, or nullptr if this build cannot run it.
using BackendFactory = std::function<std::unique_ptr<DeviceBackend>(DLDeviceType, const TargetOptions&)>;

// argv: kgate-worker {serve|probe} --library PATH --symbol NAME [--guard-seed N] [--guard-bytes N]
//       [--timeout S] [--output-limit N] [--memory-limit BYTES] [--no-sandbox] [--under-tool]
// fd 3 is the command channel and fd 4 the shared arena, as WorkerProcess sets them up.
// before_sandbox runs before the worker restricts its own writes and loads the library: the CUDA driver's
// first initialisation does file-system work (seen on the H200 machines: cudaErrorOperatingSystem from
// cudaGetDeviceCount under the write sandbox), so a CUDA build initialises the driver there.
int run_worker(int argc, char** argv, const BackendFactory& make_backend,
               const std::function<void()>& before_sandbox = {});

}  // namespace kgate
