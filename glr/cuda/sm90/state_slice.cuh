// glr/cuda/sm90/state_slice.cuh: the state slice of the sm90 state kernels, shared by the forward
// (gdn_fwd_mma.cuh: rung 3's state_t_kernel) and the backward (gdn_bwd_mma.cuh: the h and dh kernels).
//
// A state kernel block owns a (K x kVT) slice of one head's state (kVT = 64, 32 or 16 value columns, V / kVT
// blocks a head) and walks that head's chunks in order. Narrower slices give more blocks and a shorter chain of
// work per chunk where (sequences x heads) is small (B1 T32768 H16, K = V = 128: 32 blocks at 64 columns for
// 132 SMs, 128 at 16), at the price of loading k (and q, T) once per slice. Every output column is computed by
// the same arithmetic in the same order whatever the slice (the reductions run over K or the chunk, never over
// columns), so the forward's results are bitwise the same at every width.
#pragma once

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#endif

namespace glr::cuda::sm90 {

template <int kVT>
struct Slice {
  static_assert(kVT == 16 || kVT == 32 || kVT == 64, "state slices of 16, 32 or 64 columns");
  static constexpr int NN = kVT / 8;   // n-tiles of 8 columns
  static constexpr int NP = kVT / 16;  // pairs of n-tiles (one ldmatrix.x4 of B)
  static constexpr int LD = kVT + 8;   // bf16 row stride of (rows x kVT) shared tiles: rows 16-byte aligned, ldmatrix
                                       // conflict-free (48, 80 or 144 bytes)
};

// The one rule for the slice width, forward and backward: the widest of 64 and 32 columns that still gives
// every multiprocessor a block (heads x V / vt >= sms; heads = the state kernel's grid rows: B H for the
// backward, sequences x HV for the forward), else 16.
constexpr int state_slice_width(long long heads, int V, int sms) {
  for (int vt : {64, 32})
    if (heads * (V / vt) >= sms) return vt;
  return 16;
}
static_assert(state_slice_width(16, 128, 132) == 16 && state_slice_width(64, 128, 132) == 32 &&
                  state_slice_width(40, 128, 132) == 32 && state_slice_width(66, 128, 132) == 64 &&
                  state_slice_width(132, 64, 132) == 64 && state_slice_width(1, 64, 132) == 16,
              "the rule's table");

#if defined(__CUDACC__)
// The current device's multiprocessor count, read once per process (132 if it cannot be read).
inline int state_slice_sms() {
  static const int sms = [] {
    int device = 0, n = 132;
    if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
      n = 132;
    return n;
  }();
  return sms;
}
inline int state_slice_width(long long heads, int V) { return state_slice_width(heads, V, state_slice_sms()); }
#endif  // __CUDACC__

}  // namespace glr::cuda::sm90
