// glr/cuda/sm90/backward.hpp: the tensor-core backward (gdn_bwd_mma.cuh) behind glr's CUDA API, on the Problem
// that setup_backward has checked. Host code only: callers (blocks/api.cpp) need no CUDA compiler.
// glr::cuda::backward_path (glr/glr_cuda.hpp) adds the device and the GLR_BACKWARD_PATH override to this.
#pragma once

#include <cstddef>
#include <string>

#include "../common/problem.hpp"

typedef struct CUstream_st* cudaStream_t;

namespace glr::cuda::sm90 {

// Why the tensor-core backward does not take p (the first reason), or "" if it does. Every member of the family:
// Gated DeltaNet (g per token) and DeltaNet (g = 0, the same kernels with G = 0) with the delta rule; Mamba2 (g per
// token), RetNet (one g per value head, dg the sum over every token) and linear attention (g = 0) without it, through
// the kernels' kDelta = false instantiations (V_new = V, no beta, no dbeta); only the delta rule with a per-head
// gate (no member of the family) is refused. bf16 q, k, v, dout, dq, dk, dv; g and (delta rule) beta each fp32 or
// bf16, dg and dbeta in their dtypes; fp32 states; K = V = 64 or 128 (the kernels' head-dim template parameter); HV a
// multiple of H; dense batches or packed sequences (cu_seqlens, B = 1, any lengths, 0 included; h0, dht, dh0 per
// sequence); dense row-major layouts (flash-linear-attention's, any size-1 dim's stride ignored); the kernels'
// alignment and grid limits. h0, dht and dh0 are taken. The device is not looked at (but the split rule below reads
// its multiprocessor count).
//
// Few, long sequences can run the split-sequence h and dh passes (gdn_bwd_split_plan, the forward's rule, segments
// by length: segments of each sequence in parallel, chained by their K x K maps, forward for the state and transposed
// in reverse for its gradient; results differ from the unsplit passes by rounding only, and are bitwise the same run
// to run). GLR_BACKWARD_SPLIT chooses for every call, as GLR_FORWARD_SPLIT does for the forward: unset, empty or
// "auto" the rule (the default); a count 1 to 4096 or L and a length (1: never split), with a trailing h the h pass
// only; anything else is an InvalidArgument. It is read once per process (env_switch.hpp), so the workspace is never sized with one value and
// launched with another.
std::string backward_refusal(const Problem& p);

// Workspace for p (sizes only: setup_sizes is enough): a 256-byte header (the status word) and the kernels' bf16
// intermediates (gdn_bwd_workspace_bytes; packed sequences: per chunk slot, and the chunk table), those p's member
// uses only (without the delta rule no T, beta, V_new or dX: 62% of the delta rule's at K = V = 128); a 256-byte
// aligned base required.
std::size_t backward_workspace_bytes(const Problem& p);

// Launch on `stream`; the status word (workspace offset 0) is written as by the block programs: 0, or 1 for invalid
// packed offsets (checked on the device; then every output NaN). Throws InvalidArgument for a short workspace,
// CudaError on a launch failure.
// saved (or null): launch_forward's saved block for this p (the caller has matched the problem): the chunk table
// and wy kernels are skipped, T and G read from there and beta and Gr formed again from beta and g (gdn_bwd_use_saved,
// wy_scalars_kernel), every output word for word the same; InvalidArgument "saved" if it is short or misaligned.
void launch_backward(const Problem& p, void* workspace, std::size_t workspace_bytes, cudaStream_t stream,
                     void* saved = nullptr, std::size_t saved_size = 0);

}  // namespace glr::cuda::sm90
