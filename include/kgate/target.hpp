// kgate/target.hpp: the seam between the gates and whatever runs the code under test.
//
// A Target owns guarded buffers on one device and calls one entry point (a candidate kernel or an oracle)
// on tensors laid out in them. Gates speak only this interface, so every gate runs unchanged on the CPU
// backend, the CUDA backend, an in-process function (tests) or a Python callable (the PyTorch front-end).
//
// Isolation is a property of the implementation: WorkerTarget (src/kgate/worker) runs the entry point in a
// child process with a time limit; a crash or hang there ends one call with CRASHED or TIMED_OUT, throws
// nothing, and leaves the target needing reset() before its next use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kgate/abi.h"
#include "kgate/tensor.hpp"

namespace kgate {

using BufferId = std::uint32_t;

// A buffer exists only on the target's side; the driver names it by id. Every buffer sits between two
// guard zones filled with a pattern drawn from the target's guard seed.
struct GuardViolation {
  BufferId buffer = 0;
  std::int64_t offset = 0;  // bytes from the payload's start: negative = before it, >= size = after it
  std::uint8_t expected = 0, found = 0;
  // What the memory was, in words, where the buffer id cannot say: for memory the candidate allocated itself
  // (buffer == kCandidateOwnedBuffer) e.g. "output 0 returned by the candidate (4096 bytes)", "scratch
  // allocation of 65536 bytes". Empty for buffers the driver allocated.
  std::string region;
};
// The buffer id of every guard violation in memory the candidate allocated itself (a returning convention's
// outputs, its scratch): a target whose callee allocates through a guarded allocator reports them in
// CallResult::guards with this id and a region text. The bounds gate reports any seen in any call of a run.
inline constexpr BufferId kCandidateOwnedBuffer = 0xffffffffu;

// One tensor argument: a layout inside a buffer.
struct TensorArg {
  BufferId buffer = 0;
  Layout layout;
};

using Attrs = std::vector<std::pair<std::string, double>>;

// One call of the entry point.
struct Invocation {
  std::vector<TensorArg> inputs;
  std::vector<TensorArg> outputs;
  Attrs attrs;
};

enum class StreamMode {
  own_stream,      // CPU: the calling thread. CUDA: a non-blocking stream the target created (never stream 0)
  null_stream,     // CUDA: the legacy default stream is passed. CPU: same as own_stream
  staged_inputs,   // CUDA: the inputs are written by a long-running kernel on the caller's non-blocking stream
                   // just before the call, and outputs are captured as soon as that stream completes.
                   // CPU: same as own_stream
};

struct CallRequest {
  // More than one invocation: all in flight at once (CPU: one thread each, started together; CUDA: one
  // stream each). Each invocation must use its own buffers.
  std::vector<Invocation> invocations;
  StreamMode stream = StreamMode::own_stream;
  // Before the call, every element of every output is filled with these bytes (one element's worth,
  // repeated); empty leaves outputs as they are. A target whose callee allocates its own outputs applies
  // the poison to its allocator's free memory instead.
  std::vector<std::byte> poison;
};

enum class CallOutcome {
  completed,      // every invocation returned a status (see InvocationResult)
  crashed,        // the callee killed its process (signal, abort, CUDA context lost); detail says how
  timed_out,      // the call ran past the time limit and was killed
};

struct InvocationResult {
  std::int32_t status = KGATE_OK;  // kgate_status
  std::string message;             // call->message as the callee left it
  // Each output, gathered into a dense array right after the call completed (for staged_inputs: as soon
  // as the caller's stream completed, before anything else synchronises).
  std::vector<HostArray> outputs;
  // When the callee ran, in seconds from the start of the call, where the backend can see it (the CPU runs
  // each invocation on a host thread; a GPU backend leaves NaN): the stream gate uses it to know that two
  // calls really overlapped.
  double started = std::numeric_limits<double>::quiet_NaN();
  double finished = std::numeric_limits<double>::quiet_NaN();
};

struct CallResult {
  CallOutcome outcome = CallOutcome::completed;
  std::string detail;                      // "SIGSEGV", "abort", "timeout after 10.0 s", a CUDA error
  std::vector<InvocationResult> results;   // one per invocation when completed
  std::vector<GuardViolation> guards;      // first violation per buffer touched by the call, if any
  std::string output;                      // what the callee printed (stdout+stderr), cut at a limit
  std::size_t output_bytes = 0;            // how much it printed in all
  double seconds = 0.0;                    // wall time of the call itself
};

// Thrown by Target methods (other than call) when the target cannot serve them, e.g. its worker died
// earlier and was not reset, or a driver-side request is invalid. Carries a human-readable reason.
class TargetError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Target {
 public:
  virtual ~Target() = default;
  virtual std::string describe() const = 0;  // "libsoftmax.so:kgate_run (cpu, isolated)"
  virtual DLDeviceType device() const = 0;

  // A payload of `bytes` between guard zones; contents unspecified until written.
  virtual BufferId alloc(std::size_t bytes) = 0;
  virtual void release(BufferId id) = 0;
  virtual void write(BufferId id, std::size_t offset, std::span<const std::byte> data) = 0;
  // `bytes` copies of one byte from `offset`: what write() of a uniform payload does, without the payload (an
  // output's poison or gap fill is as large as the output, and crosses to a worker or device on every call).
  // The default writes the payload; a target that can fill where the buffer lives overrides it.
  virtual void fill(BufferId id, std::size_t offset, std::size_t bytes, std::byte value) {
    const std::vector<std::byte> payload(bytes, value);
    write(id, offset, payload);
  }
  virtual std::vector<std::byte> read(BufferId id, std::size_t offset, std::size_t bytes) = 0;
  virtual std::vector<GuardViolation> check_guards(BufferId id) = 0;

  virtual CallResult call(const CallRequest& request) = 0;

  // After a crash or timeout: start afresh (new worker, no buffers). Cheap when nothing is wrong.
  virtual void reset() = 0;
  // Whether the target can serve requests without reset().
  virtual bool healthy() const = 0;
};

}  // namespace kgate
