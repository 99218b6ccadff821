// glr/glr_cuda.hpp: the CUDA forward and training backward of the gated-linear-recurrence family on
// device pointers and a stream, for the problem described by glr::Params (params.hpp: layouts, strides,
// family member, packed sequences).
//
// Every precondition is checked on the host before anything is enqueued; a bad argument throws
// glr::InvalidArgument naming it ("q.dtype", "workspace", "cu_seqlens", ...), a CUDA failure throws
// glr::cuda::CudaError naming the stage. Nothing synchronises the stream.
//
// Supported: K, V in {64, 128}, chunk 64; q, k, v (and o, dout, dq, dk, dv) all bf16 or all fp16; g, beta
// (and dg, dbeta) fp32 or the dtype of q; states h0, ht, dht, dh0 fp32; any non-negative element strides;
// every pointer aligned to its element size. Results are bitwise reproducible (no atomics).
//
// Packed sequences: Params::cu_seqlens is the host copy (checked on the host). The kernels read the offsets
// from the device: pass them in DeviceOffsets (int64 or int32, N + 1 values, the same as the host copy). A caller
// with the offsets only on the device may leave Params::cu_seqlens empty (B = 1, T = total length) and set
// DeviceOffsets::num_seqs: the offsets are then checked on the device, and if they are invalid every output
// is NaN and workspace_status() returns kStatusBadOffsets (no host sync is ever needed to launch).
//
// Paths: see ForwardPath and BackwardPath below (the tensor-core kernels where they apply, else the block
// programs).
//
// Workspace: forward_workspace_bytes / backward_workspace_bytes say how much; the overloads without a workspace
// allocate it with cudaMallocAsync on the caller's stream and free it with cudaFreeAsync.
//
// Saved intermediates (optional; see Saved below): by default the backward recomputes every intermediate of the
// forward, so it needs nothing from the forward call. A training caller may instead hand the forward a Saved
// (ForwardOptions::save, saved_bytes() of device memory): the sm90 forward leaves there what its wy kernel forms at
// a cost (T = (I + L)^-1 and the cumulative gates G per chunk, the chunk table of packed sequences), and the sm90
// backward given it (BackwardOptions::saved) skips its own wy and chunk table kernels (0.226 ms of 2.4 ms at B8 T4096
// H16 on an H200) for one small kernel that forms beta and the gates' sums from beta and g again (69.2 MB = 66 MiB
// held between the calls: T 64 MiB, G 2 MiB). The backward's outputs are word for word the same either way, and so are the
// forward's o and ht (the sm90 forward forms T as the backward does whether or not it saves). A Saved made
// for another problem is refused ("saved"); one the forward left empty (its block programs ran) is recomputed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "glr/params.hpp"

// cudaStream_t without the CUDA headers (the same declaration as cuda_runtime_api.h's).
typedef struct CUstream_st* cudaStream_t;

namespace glr::cuda {

enum class DType : std::int32_t { f32 = 0, f16 = 1, bf16 = 2, f64 = 3 };
const char* name_of(DType t);

struct In {
  const void* data = nullptr;
  DType dtype = DType::bf16;
};
struct Out {
  void* data = nullptr;
  DType dtype = DType::bf16;
};

// Absent tensors (g for an ungated member, beta without the delta rule, h0/ht without states) stay null.
struct ForwardTensors {
  In q, k, v, g, beta, h0;
  Out o, ht;
};
struct BackwardTensors {
  In q, k, v, g, beta, h0, dout, dht;
  Out dq, dk, dv, dg, dbeta, dh0;
};

struct DeviceOffsets {
  const std::int64_t* cu_seqlens = nullptr;    // device, [num_seqs + 1]
  std::int64_t num_seqs = 0;                   // with Params::cu_seqlens set: 0 or its N
  const std::int32_t* cu_seqlens32 = nullptr;  // the same offsets as int32, instead of cu_seqlens
};

inline constexpr std::int32_t kStatusOk = 0;
inline constexpr std::int32_t kStatusBadOffsets = 1;

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Which kernels a forward call runs. sm90: the tensor-core forward (glr/cuda/sm90, rung 3 of
// gdn_fwd_mma.cuh) on an sm_90 device for bf16 q, k, v, K = V = 64 or 128, dense layouts (every member, grouped
// value heads, packed sequences, h0/ht); blocks: the block programs (any supported problem, any strides).
// Both are bitwise deterministic; they differ within bf16 bounds. (The backward's choice: BackwardPath.)
// The environment variable GLR_FORWARD_PATH = blocks forces the block programs (for diffing); unset or "auto"
// lets forward_path choose; any other value is an InvalidArgument naming it. GLR_FORWARD_LOG (set to anything)
// prints each forward call's path and reason to stderr.
enum class ForwardPath : std::int32_t { blocks = 0, sm90 = 1 };
const char* name_of(ForwardPath p);  // "blocks", "sm90"
struct ForwardChoice {
  ForwardPath path = ForwardPath::blocks;
  std::string reason;  // one line: why this path (what made sm90 apply, or what ruled it out)
};
// The forward's saved intermediates for the backward (see the opening comment). data: device memory, 256-byte
// aligned, at least saved_bytes(params, offsets) bytes (the caller's; it must outlive the backward calls that read
// it and not change between them). key: host words that forward() writes and backward() checks: the problem the
// data was made for (sizes B, T, H, HV, N, K, V; the member: delta rule, gate; g's and beta's dtypes), all 0 when
// nothing was saved (the forward took the block programs, or failed). The inputs themselves are not checked: the
// backward must get the forward's q, k, v, g, beta (k, g and beta are what the saved data was made from).
inline constexpr int kSavedKeyWords = 12;
struct Saved {
  void* data = nullptr;
  std::size_t bytes = 0;
  std::int64_t key[kSavedKeyWords] = {};
};
// The bytes of a Saved for this problem (the sm90 path's T and G, and packed sequences' chunk table; 69.2 MB = 66 MiB
// at B8 T4096 H16 K = V = 128 with the delta rule, 2.1 MB without it). The same whichever path the forward then takes.
std::size_t saved_bytes(const Params& params, const DeviceOffsets& offsets = {});

// What a caller may ask of the dispatch. force_blocks: the block programs whatever forward_path would say (as
// GLR_FORWARD_PATH=blocks does, for callers whose environment is not theirs: kgate's isolated workers). save: the
// sm90 path leaves its wy outputs there and sets save->key; the block programs leave save->key all 0 (nothing
// saved: a backward given it recomputes). InvalidArgument "saved" for null, misaligned or short data.
struct ForwardOptions {
  bool force_blocks = false;
  Saved* save = nullptr;
};

// The path forward() takes for this call on the current CUDA device; throws what forward() would throw
// for an invalid call. Reads no tensor data and enqueues nothing.
ForwardChoice forward_path(const Params& params, const ForwardTensors& t, const DeviceOffsets& offsets,
                           const ForwardOptions& options = {});

// Enough workspace for either path.
std::size_t forward_workspace_bytes(const Params& params, const DeviceOffsets& offsets = {});
// The workspace of one path (the sm90 path needs about 5% of the block programs' at B8 T4096 H16).
std::size_t forward_workspace_bytes(const Params& params, const DeviceOffsets& offsets, ForwardPath path);

// Which kernels a backward call runs. sm90: the tensor-core backward (glr/cuda/sm90/gdn_bwd_mma.cuh) on an sm_90
// device for Gated DeltaNet and DeltaNet (g = 0: the same kernels with the decay 1), bf16 q, k, v, dout (and dq, dk,
// dv), g and beta each fp32 or bf16 (dg, dbeta in their dtypes), K = V = 64 or 128, HV a multiple of H, dense batches or
// packed sequences (cu_seqlens), dense layouts; h0, dht, dh0 taken (per sequence). blocks: the block programs (any supported problem, any strides).
// Both are bitwise deterministic; they differ within bf16 bounds. GLR_BACKWARD_PATH = blocks forces the block programs; unset or "auto" lets
// backward_path choose; any other value is an InvalidArgument naming it. GLR_BACKWARD_LOG (set to anything)
// prints each backward call's path and reason to stderr. The backward's path does not depend on the forward's.
enum class BackwardPath : std::int32_t { blocks = 0, sm90 = 1 };
const char* name_of(BackwardPath p);  // "blocks", "sm90"
struct BackwardChoice {
  BackwardPath path = BackwardPath::blocks;
  std::string reason;  // one line: why this path (what made sm90 apply, or what ruled it out)
};
// force_blocks: the block programs whatever backward_path would say (as GLR_BACKWARD_PATH=blocks does). saved: the
// forward's Saved (ForwardOptions::save) for this problem: the sm90 path reads the wy outputs from it instead of
// recomputing them (the same outputs, word for word). InvalidArgument "saved" if its key names another problem or
// its data is null, misaligned or short; a key all 0 (nothing saved) and the block programs recompute (the block
// programs never read it). The saved data is only read: one Saved serves any number of backward calls.
struct BackwardOptions {
  bool force_blocks = false;
  const Saved* saved = nullptr;
};

// The path backward() takes for this call on the current CUDA device; throws what backward() would throw
// for an invalid call. Reads no tensor data and enqueues nothing.
BackwardChoice backward_path(const Params& params, const BackwardTensors& t, const DeviceOffsets& offsets,
                             const BackwardOptions& options = {});

// Enough workspace for either path.
std::size_t backward_workspace_bytes(const Params& params, const DeviceOffsets& offsets = {});
// The workspace of one path (the sm90 path needs about a quarter of the block programs' at B8 T4096 H16).
std::size_t backward_workspace_bytes(const Params& params, const DeviceOffsets& offsets, BackwardPath path);

// workspace: device memory, 256-byte aligned, at least the queried size.
void forward(const Params& params, const ForwardTensors& t, const DeviceOffsets& offsets, void* workspace,
             std::size_t workspace_bytes, cudaStream_t stream, const ForwardOptions& options = {});
void backward(const Params& params, const BackwardTensors& t, const DeviceOffsets& offsets, void* workspace,
              std::size_t workspace_bytes, cudaStream_t stream, const BackwardOptions& options = {});

// The same, with the workspace allocated and freed on `stream` (stream-ordered, no sync).
void forward(const Params& params, const ForwardTensors& t, const DeviceOffsets& offsets, cudaStream_t stream,
             const ForwardOptions& options = {});
void backward(const Params& params, const BackwardTensors& t, const DeviceOffsets& offsets, cudaStream_t stream,
              const BackwardOptions& options = {});

// The status word of a workspace after a call (synchronises the stream): kStatusOk, or kStatusBadOffsets
// when device-only offsets were invalid and the outputs were filled with NaN.
std::int32_t workspace_status(const void* workspace, cudaStream_t stream);

}  // namespace glr::cuda
