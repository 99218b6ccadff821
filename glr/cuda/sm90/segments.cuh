// glr/cuda/sm90/segments.cuh: the split-sequence state passes' segments, cut by length (issue 16 item 1), shared by
// the forward's state pass (gdn_fwd_mma.cuh: passes A, B, C) and the backward's h and dh passes (gdn_bwd_mma.cuh).
//
// A sequence of nch chunks is cut into
//     nseg(nch) = max(1, min(segs, floor(nch / len)))
// balanced segments, segment j holding chunks [j nch / nseg, (j + 1) nch / nseg): every segment between len and
// 2 len - 1 chunks long, a sequence shorter than 2 len chunks whole (nseg = 1: no pass A, no combine, no Es slot).
// segs = 1: never split. segs = n with len = 1 is "every sequence in n segments" (min(n, nch)), the fixed count of
// GLR_FORWARD_SPLIT=n; the rule (split_plan) picks len from what the host knows (T, sequences, HV, D, SM count),
// never from the individual lengths, which stay on the device (cu_seqlens): no copy back, the op asynchronous and
// graph-capturable.
//
// Numbering (per value head hv; every state array index below is (index HV + hv) K V):
//   segment rows r (pass C, the h kernel, the dh pass C): every segment of every sequence, sequences in order;
//   Es/Ms slots q (pass A, the dh pass A'): segments 0 .. nseg - 2 of each sequence with nseg > 1, Es slot q the
//     state entering segment j + 1, Ms slot q the map of segment j (j >= 1);
//   combine rows m: the sequences with nseg >= 3 (fewer have nothing to combine).
// Dense batches (one nch for all): closed forms. Packed sequences: the segment table (segment_table_kernel, on the
// device after the chunk table) holds the three prefix sums, first_seg[N + 1], first_slot[N + 1], first_comb[N + 1];
// a block finds its sequence by binary search. The grids take the host's upper bounds (seg_rows, seg_slots,
// seg_combs: from sum nch <= chunk_slots()); blocks past the real count exit.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace glr::cuda::sm90::seg {

inline constexpr int kTableFirst = 2;  // gdn::kFirst: the chunk table's first-chunk prefix starts here

// Segments of a sequence of nch chunks.
__host__ __device__ constexpr int count(int segs, int len, long long nch) {
  if (segs <= 1) return 1;
  long long s = nch / (len < 1 ? 1 : len);
  if (s > segs) s = segs;
  return s < 1 ? 1 : static_cast<int>(s);
}
// Its segment j's chunks [begin, end).
__host__ __device__ constexpr int begin(int j, int nseg, int nch) {
  return static_cast<int>(static_cast<long long>(j) * nch / nseg);
}

// Host and device upper bounds per value head, for any args type with B, T, N, segs, seg_len, varlen(),
// chunk_slots() (GdnFwdArgs, GdnBwdArgs). Dense batches: exact.
template <class A>
__host__ __device__ constexpr long long dense_count(const A& a) {
  return count(a.segs, a.seg_len, (static_cast<long long>(a.T) + 63) / 64);
}
template <class A>  // segment rows (grid rows of pass C / HV)
__host__ __device__ constexpr long long rows(const A& a) {
  if (!a.varlen()) return static_cast<long long>(a.B) * dense_count(a);
  if (a.segs <= 1) return a.N;
  const long long r1 = static_cast<long long>(a.N) * a.segs, r2 = a.N + a.chunk_slots() / a.seg_len;
  return r1 < r2 ? r1 : r2;
}
template <class A>  // Es / Ms slots (grid rows of pass A / HV); 0: not split
__host__ __device__ constexpr long long slots(const A& a) {
  if (!a.varlen()) return static_cast<long long>(a.B) * (dense_count(a) - 1);
  if (a.segs <= 1) return 0;
  const long long r1 = static_cast<long long>(a.N) * (a.segs - 1), r2 = a.chunk_slots() / a.seg_len;
  return r1 < r2 ? r1 : r2;
}
template <class A>  // sequences with at least 3 segments (grid rows of the combine / HV)
__host__ __device__ constexpr long long combs(const A& a) {
  if (!a.varlen()) return dense_count(a) >= 3 ? a.B : 0;
  if (a.segs <= 2) return 0;
  const long long r2 = a.chunk_slots() / (3LL * a.seg_len);
  return a.N < r2 ? a.N : r2;
}
template <class A>
__host__ __device__ constexpr bool split(const A& a) {
  return slots(a) > 0;
}
// The packed segment table's int32 words (3 (N + 1)); 0 for dense batches or unsplit.
template <class A>
__host__ __device__ constexpr long long table_words(const A& a) {
  return a.varlen() && split(a) ? 3LL * (a.N + 1) : 0;
}

// Where a grid row of one kind lies: sequence n, segment j of its nseg, the Es slot of its segment 0 (nseg > 1).
struct Pos {
  int n, j, nseg, slot0;
};
enum Kind { kRow = 0, kSlot = 1, kComb = 2 };

// Row i of kind k; false past the real count. Packed: needs the chunk table valid (the caller checks table[0]) and
// the segment table built (when split).
template <class A>
__device__ __forceinline__ bool pos(const A& a, Kind k, int i, Pos& p) {
  if (!a.varlen()) {
    const int nseg = static_cast<int>(dense_count(a));
    const int per = k == kRow ? nseg : k == kSlot ? nseg - 1 : 1;
    if (per < 1 || (k == kComb && nseg < 3)) return false;
    p.n = i / per;
    p.j = k == kComb ? 0 : i % per;
    p.nseg = nseg;
    p.slot0 = p.n * (nseg - 1);
    return p.n < a.B;
  }
  if (!split(a)) {  // unsplit packed: row n is sequence n
    if (k != kRow || i >= a.N) return false;
    p.n = i;
    p.j = 0;
    p.nseg = 1;
    p.slot0 = 0;
    return true;
  }
  const std::int32_t* first_seg = a.segtab;
  const std::int32_t* arr = a.segtab + static_cast<int>(k) * (a.N + 1);
  if (i >= arr[a.N]) return false;
  int lo = 0, hi = a.N - 1;  // the largest n with arr[n] <= i (arr[0] = 0 <= i)
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (arr[mid] <= i)
      lo = mid;
    else
      hi = mid - 1;
  }
  p.n = lo;
  p.j = k == kComb ? 0 : i - arr[lo];
  p.nseg = first_seg[lo + 1] - first_seg[lo];
  p.slot0 = a.segtab[(a.N + 1) + lo];
  return true;
}

}  // namespace glr::cuda::sm90::seg
