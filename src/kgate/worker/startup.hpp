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

// Whether the worker enters isolation (src/kgate/worker/isolation.hpp): always, except under a wrapper tool
// (compute-sanitizer finds its target by pid and shares files with it) or when KGATE_UNSAFE_NO_ISOLATION=1
// (kgate verify --unsafe-no-isolation; tests on machines without namespaces).
bool worker_isolated(const TargetOptions& options);

// Sends the setup frame (the guard seed), the worker's first message. Secrets travel only this way: a
// worker's argv and environment are readable by everything it runs.
void send_setup(WorkerProcess& worker, const TargetOptions& options, double timeout_seconds);

// How a worker's death reads in a verdict: a SIGSYS death, which the isolation's seccomp filter causes for
// exactly the calls that can only be aimed at the judge, is named an attack on the judge (docs/security.md).
std::string explain_death(const std::string& death);

// Waits for the hello. Returns the device the library takes; throws LoadError for what the loader
// rejected and LoadCrash when the library crashed, hung or broke the protocol while loading.
DLDeviceType await_hello(WorkerProcess& worker, const EntrySpec& spec, double timeout_seconds);

}  // namespace kgate
