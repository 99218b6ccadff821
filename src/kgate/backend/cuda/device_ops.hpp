// The CUDA backend's own kernels behind a plain C++ interface, so the backend's logic compiles with the host
// compiler and only device_ops.cu goes through nvcc. Every function only enqueues work on the given stream
// and returns the launch's error; none synchronises.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace kgate::cuda_ops {

// Guard bytes: byte i of a buffer's 2*guard guard bytes (front then back) is stream_bits(key, i) & 0xff, the
// same pattern the CPU backend draws, so a violation reads the same on both.
cudaError_t fill_guards(std::byte* front, std::byte* back, std::size_t guard, std::uint64_t key, cudaStream_t s);

// One buffer's guards to scan.
struct GuardSpan {
  const std::byte* front = nullptr;  // guard bytes before the payload
  const std::byte* back = nullptr;   // guard bytes after the payload
  std::uint64_t key = 0;
};
// The scan's answer for one buffer. Both distances are kept by atomicMin, so memset 0xff means "none found".
struct GuardScan {
  unsigned long long front_distance;  // 0 = the byte just before the payload; ~0ull: front guard intact
  unsigned long long back_offset;     // 0 = the byte just after the payload; ~0ull: back guard intact
  unsigned int front_found;           // the byte found at that place (valid when a violation was found)
  unsigned int back_found;
};
inline constexpr int kMaxGuardSpans = 64;  // buffers per launch (the spans travel as a kernel argument)
struct GuardSpans {
  int count = 0;
  GuardSpan span[kMaxGuardSpans];
};
// Finds, per buffer, the differing byte nearest the payload on each side, then reads the bytes found.
// `out` (device memory, count entries) must be filled with 0xff bytes first.
cudaError_t scan_guards(const GuardSpans& spans, std::size_t guard, GuardScan* out, cudaStream_t s);

// Every element of a strided tensor filled with `pattern` (byte b of each element = pattern[b % length]).
inline constexpr int kMaxRank = 8;
struct PoisonFill {
  std::byte* first = nullptr;  // element 0
  int rank = 0;
  long long shape[kMaxRank] = {};
  long long strides[kMaxRank] = {};  // elements
  long long numel = 0;
  int element_size = 0;
  int pattern_length = 0;
  unsigned char pattern[16] = {};
};
cudaError_t poison_fill(const PoisonFill& fill, cudaStream_t s);

// The staged-inputs kernel: waits (one spinning thread per block) until the host has released the call
// (`host_flag`, mapped host memory, becomes nonzero) and at least min_ns have passed since the first staged
// kernel of this call started, then copies each hidden staging copy into the input it belongs to. It gives up
// waiting after max_ns, so a callee that synchronises inside its call cannot deadlock the call; it then sets
// *timed_out. `start_ns`, `go` and `timed_out` are device words shared by every staged kernel of one call,
// zeroed before the call.
inline constexpr int kMaxStagedCopies = 16;
struct StagedCopies {
  int count = 0;
  const std::byte* src[kMaxStagedCopies] = {};
  std::byte* dst[kMaxStagedCopies] = {};
  unsigned long long bytes[kMaxStagedCopies] = {};
};
struct StagedRelease {
  bool wait = true;  // false: copy only (a second batch behind the first kernel of the same stream)
  const unsigned int* host_flag = nullptr;  // device view of the mapped host word
  unsigned long long* start_ns = nullptr;
  unsigned int* go = nullptr;
  unsigned int* timed_out = nullptr;
  unsigned long long min_ns = 0, max_ns = 0;
};
cudaError_t staged_copy(const StagedCopies& copies, const StagedRelease& release, cudaStream_t s);

}  // namespace kgate::cuda_ops
