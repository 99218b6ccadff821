// Starting a worker up to its hello: shared by WorkerTarget and probe_entry, so a library is judged the
// same way whether it is only checked or about to be verified.
#pragma once

#include <string>
#include <vector>

#include "kgate/targets.hpp"
#include "worker/process.hpp"

namespace kgate {

// Arguments for `kgate-worker MODE` loading `spec` (library path made absolute: the worker runs elsewhere).
std::vector<std::string> worker_args(const char* mode, const EntrySpec& spec, const TargetOptions& options);

// Waits for the hello. Returns the device the library takes; throws LoadError for what the loader
// rejected and LoadCrash when the library crashed, hung or broke the protocol while loading.
DLDeviceType await_hello(WorkerProcess& worker, const EntrySpec& spec, double timeout_seconds);

}  // namespace kgate
