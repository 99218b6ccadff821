// glr/cuda/sm90/forward.hpp: the tensor-core forward (gdn_fwd_mma.cuh, rung 3) behind glr's CUDA API, on the
// Problem that setup_forward has checked. Host code only: callers (blocks/api.cpp) need no CUDA compiler.
// glr::cuda::forward_path (glr/glr_cuda.hpp) adds the device and the GLR_FORWARD_PATH override to this.
#pragma once

#include <cstddef>
#include <string>

#include "../common/problem.hpp"

typedef struct CUstream_st* cudaStream_t;

namespace glr::cuda::sm90 {

// Why the tensor-core forward does not take p (the first reason), or "" if it does: bf16 q, k, v, o;
// K = V = 64 or 128; g and beta fp32 or bf16; dense row-major layouts (flash-linear-attention's, any size-1 dim's
// stride ignored); 16-byte aligned q, k, v; the grid's limits. Every member, grouped value heads, packed
// sequences (host or device-only offsets), h0 and ht are taken. The device is not looked at (but the split rule
// below reads its multiprocessor count).
//
// Few, long sequences can run the split-sequence state pass (gdn_fwd_split_plan: segments of each sequence in
// parallel, cut by length, sm90/segments.cuh, chained by their K x K transitions; results differ from the unsplit pass
// by rounding only, and are bitwise the same run to run). GLR_FORWARD_SPLIT chooses for every call: unset, empty or
// "auto" the rule (the default); a whole number 1 to 4096 every sequence in that many segments (1: never split); L and
// a length in chunks (L64) segments of that length; anything else is an InvalidArgument. It is read once per process
// (env_switch.hpp), so the workspace is never sized with one value and launched with another.
std::string forward_refusal(const Problem& p);

// Workspace for p (sizes only: setup_sizes is enough), 256-byte aligned base required.
std::size_t forward_workspace_bytes(const Problem& p);

// The wy outputs the forward can leave for the backward (glr::cuda::Saved): T and G per chunk slot and the chunk
// table of packed sequences (gdn_wy_saved_bytes, gdn_fwd_mma.cuh), bytes for p's sizes and member.
std::size_t saved_bytes(const Problem& p);
// InvalidArgument "saved" unless saved is 256-byte aligned and saved_size >= saved_bytes(p) (launch_forward's and
// launch_backward's check).
void check_saved(const Problem& p, const void* saved, std::size_t saved_size);

// Launch on `stream`; the status word (workspace offset 0) is written as by the block programs (0, or 1 for
// invalid device-only offsets, then every output NaN). Throws CudaError on a launch failure. saved (256-byte
// aligned, saved_bytes(p) bytes, or null): the wy kernel writes T and G there and the state kernel reads them, for
// launch_backward to take; InvalidArgument "saved" if it is short or misaligned.
void launch_forward(const Problem& p, void* workspace, std::size_t workspace_bytes, cudaStream_t stream,
                    void* saved = nullptr, std::size_t saved_size = 0);

}  // namespace glr::cuda::sm90
