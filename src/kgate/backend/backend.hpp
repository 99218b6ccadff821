// The device seam under every Target: guarded buffers on one device and the invocation of one entry point.
//
// InProcessTarget drives a DeviceBackend directly; the worker process drives one on behalf of a
// WorkerTarget in the driver. The CPU backend is backend/cpu, the CUDA backend backend/cuda.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kgate/abi.h"
#include "kgate/target.hpp"
#include "kgate/targets.hpp"

namespace kgate {

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual DLDeviceType device() const = 0;
  virtual BufferId alloc(std::size_t bytes) = 0;
  virtual void release(BufferId id) = 0;
  virtual void write(BufferId id, std::size_t offset, std::span<const std::byte> data) = 0;
  virtual std::vector<std::byte> read(BufferId id, std::size_t offset, std::size_t bytes) = 0;
  virtual std::vector<GuardViolation> check_guards(BufferId id) = 0;
  // Poison, call `entry` once per invocation as the request says, gather outputs, check the guards of
  // every buffer touched. Never throws for anything the callee does short of killing the process; throws
  // TargetError for an invalid request (unknown buffer, layout past a buffer's end).
  virtual CallResult invoke(const CallRequest& request, const EntryFn& entry) = 0;
};

// Host memory: each buffer is one aligned allocation [guard | payload | guard], the payload 256-byte aligned.
// Concurrent invocations run on their own threads, released together.
std::unique_ptr<DeviceBackend> make_cpu_backend(const TargetOptions& options);

}  // namespace kgate
