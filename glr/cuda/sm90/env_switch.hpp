// glr/cuda/sm90/env_switch.hpp: the one reader of the sm90 path's environment switches (GLR_BWD_WGMMA, GLR_BWD_CHUNK_TMA,
// GLR_BWD_GROUP_KERNEL, GLR_DH_WGMMA, GLR_DH_2GEMM, GLR_FUSED_BWD, GLR_H_WGMMA, GLR_H_PREFETCH, GLR_DH_PREFETCH,
// GLR_FWD_WGMMA, GLR_FWD_PREFETCH, GLR_FORWARD_SPLIT, GLR_BACKWARD_SPLIT; their values and meaning: glr/cuda/README.md).
// Each switch is read once per process, where its caller keeps the result in a function-local static, so that a
// workspace sized with one value is never launched with another. A value outside the documented ones is a
// glr::InvalidArgument naming the variable (thrown again at each call until the variable is fixed), never silently
// the default.
#pragma once

#include <cstdlib>
#include <cstring>
#include <string>

#include "../../include/glr/params.hpp"  // glr::InvalidArgument

namespace glr::cuda::sm90 {

// An on/off switch: unset or empty -> `unset`; "0" -> false; "1" -> true.
inline bool env_flag(const char* name, bool unset) {
  const char* e = std::getenv(name);
  if (e == nullptr || *e == '\0') return unset;
  if (std::strcmp(e, "0") == 0) return false;
  if (std::strcmp(e, "1") == 0) return true;
  throw InvalidArgument(name, std::string("is '") + e + "'; use 0 or 1 (unset: " + (unset ? "1" : "0") + ")");
}

// An on/off switch whose unset meaning depends on the caller: unset or empty -> -1; "0" -> 0; "1" -> 1.
inline int env_flag_or_unset(const char* name, const char* unset_means) {
  const char* e = std::getenv(name);
  if (e == nullptr || *e == '\0') return -1;
  if (std::strcmp(e, "0") == 0) return 0;
  if (std::strcmp(e, "1") == 0) return 1;
  throw InvalidArgument(name, std::string("is '") + e + "'; use 0 or 1 (unset: " + unset_means + ")");
}

// A count: unset, empty or "auto" -> 0 (the caller's rule); a whole number from lo to hi -> that number.
inline int env_count(const char* name, int lo, int hi) {
  const char* e = std::getenv(name);
  if (e == nullptr || *e == '\0' || std::strcmp(e, "auto") == 0) return 0;
  char* end = nullptr;
  const long n = std::strtol(e, &end, 10);
  if (*end != '\0' || !(*e >= '0' && *e <= '9') || n < lo || n > hi)
    throw InvalidArgument(name, std::string("is '") + e + "'; use 'auto' or a number from " + std::to_string(lo) +
                                    " to " + std::to_string(hi));
  return static_cast<int>(n);
}

// The switches, each read once per process (the first call throws on a bad value, and so does every later one).
// GLR_BWD_WGMMA: the backward's chunk kernel on wgmma (chunk_wgmma_kernel, gdn_bwd_wgmma.cuh), the default; 0:
// chunk_kernel.
inline bool bwd_chunk_wgmma() {
  static const bool on = env_flag("GLR_BWD_WGMMA", true);
  return on;
}
// GLR_BWD_CHUNK_TMA: that chunk kernel as chunk_tma_kernel (gdn_bwd_chunk_tma.cuh: a persistent grid, every tile by
// TMA on mbarriers, the next chunk's tiles loaded during this one's products; the same output words: 0 words differed
// from chunk_wgmma_kernel on an H100 at B8 T4096 H16, B1 T32768 H16 HV32 and packed 32k, bench/glr/switch_diff.py),
// opt-in: on that H100 it took 1.056 ms at B8 T4096 H16 against chunk_wgmma_kernel's 0.931 (0.88x; docs/perf.md);
// unset or 0: chunk_wgmma_kernel. Only with GLR_BWD_WGMMA on.
inline bool bwd_chunk_tma() {
  static const bool on = env_flag("GLR_BWD_CHUNK_TMA", false);
  return on;
}
// GLR_BWD_GROUP_KERNEL: with grouped value heads (HV > H) the group sums of dq and dk, unset or 0: inside
// chunk_wgmma_kernel / chunk_kernel by the last block of each (chunk, q/k head) tile to finish (group_sum_last; the
// default since the H100 A/B of 2026-12-06: the same words as group_kernel on the GPU and on the emulator in four
// block orders, fwd+bwd 1.3% and 1.1% faster at B1 T32768 H16 HV32 and packed 32k HV32, docs/perf.md); 1: the
// separate group_kernel (gdn_bwd_mma.cuh). chunk_tma_kernel (GLR_BWD_CHUNK_TMA=1) and fused_bwd_kernel
// (GLR_FUSED_BWD=1) use group_kernel either way.
inline bool bwd_group_kernel() {
  static const bool on = env_flag("GLR_BWD_GROUP_KERNEL", false);
  return on;
}
// GLR_DH_WGMMA: which kernel runs the backward's dh pass, dh_wgmma_kernel (wgmma, gdn_bwd_dh_wgmma.cuh) or dh_kernel
// (mma.sync), the same words. Unset: dh_kernel where the pass is unsplit (on an H100 on 2026-12-07 its time was
// 0.84-0.94x dh_wgmma_kernel's at B8 T4096 H16, B4 T8192 H32 and B16 T2048 H32 K64: docs/perf.md; dh_wgmma_kernel
// had been the faster on the H200 of 2026-12-05, before either kernel's later changes), dh_wgmma_kernel where it is
// split (GLR_BACKWARD_SPLIT; gdn_bwd_split_plan's rule for it), as before: not measured against dh_kernel since.
// 1: dh_wgmma_kernel everywhere (the default until 2026-12-07); 0: dh_kernel everywhere. `split`: whether the caller
// is the split pass (or plans it).
inline bool bwd_dh_wgmma(bool split) {
  static const int v = env_flag_or_unset("GLR_DH_WGMMA", "dh_kernel unsplit, dh_wgmma_kernel split");
  return v < 0 ? split : v == 1;
}
// GLR_DH_2GEMM=1: the backward's unsplit dh pass at 64-column slices with the delta rule as dh2_kernel
// (gdn_bwd_dh2.cuh: the dh update as a 2-GEMM chain on one warpgroup, every other product on a second); other
// cases as GLR_DH_WGMMA says. Not yet run on a GPU.
inline bool bwd_dh_2gemm() {
  static const bool on = env_flag("GLR_DH_2GEMM", false);
  return on;
}
// GLR_FUSED_BWD=1: the backward's dh pass and chunk kernel as one reverse sweep per (sequence, value head)
// (fused_bwd_kernel, gdn_bwd_fused.cuh) where it applies (K = V = 128, the delta rule; split sequences after the
// split dh pass's pass A', storing only its Es slots, and combine); the workspace then carves none of the chunk kernels'
// inputs (chunk_inputs_stored). Its first form ran on an H100 (0.92x the two kernels); this one has not.
inline bool bwd_fused() {
  static const bool on = env_flag("GLR_FUSED_BWD", false);
  return on;
}
// GLR_H_WGMMA=1: the backward's h pass on wgmma (state_t_wgmma_kernel's kHPass mode, gdn_state_wgmma.cuh) at slice
// width 64, the split pass's passes A and C included; not yet run on a GPU.
inline bool bwd_h_wgmma() {
  static const bool on = env_flag("GLR_H_WGMMA", false);
  return on;
}
// GLR_H_PREFETCH: the backward's h pass on h_kernel (GLR_H_WGMMA unset or 0) with the delta rule at slices of 64 and
// 32 columns (h_prefetch_takes) in its prefetching schedule (h_kernel's kPrefetch, gdn_bwd_mma.cuh: chunk c + 1's k, G,
// Gr, beta loaded during all of chunk c, its T and v rows from phase C to its own phase-A epilogue; the same products
// in the same order, so the same words: 0 differed on the emulator and on an H100). The default since the H100 A/B of
// 2026-12-07 (fwd+bwd 0.981 of the two default runs with the drift at 0.995, with GLR_FWD_PREFETCH 0.970; tests/glrtorch
// with both on: 72 passed; docs/perf.md); 0: the plain schedule.
inline bool bwd_h_prefetch() {
  static const bool on = env_flag("GLR_H_PREFETCH", true);
  return on;
}
// GLR_DH_PREFETCH=1: the backward's dh pass on dh_wgmma_kernel (GLR_DH_WGMMA on, GLR_DH_2GEMM / GLR_FUSED_BWD not
// taking the case) at 64-column slices with the delta rule (dh_prefetch_takes), split or not, in its prefetching
// schedule (dh_wgmma_kernel's kPrefetch, gdn_bwd_dh_wgmma.cuh: chunk c - 1's q, k, dO loaded during chunk c, q and k
// rotating with dh''s bf16 copy and dV_new over two regions; the same products in the same order, so the same words:
// 0 differed on the emulator); unset or 0: the plain schedule. Opt-in until a GPU measures it (not yet run on a GPU).
inline bool bwd_dh_prefetch() {
  static const bool on = env_flag("GLR_DH_PREFETCH", false);
  return on;
}
// GLR_FWD_WGMMA: the forward's rung-3 state kernel on wgmma (state_t_wgmma_kernel, gdn_state_wgmma.cuh) at slice
// width 64, the split pass's passes A and C included, the default since its H200 run of 2026-12-05 (correct; the
// forward 1.1-1.4x state_t_kernel's at every timed shape: docs/perf.md); 0: state_t_kernel.
inline bool state_wgmma_requested() {
  static const bool on = env_flag("GLR_FWD_WGMMA", true);
  return on;
}
// GLR_FWD_PREFETCH: that wgmma state kernel with the delta rule (the unsplit pass, the split pass's passes A and C;
// pass A also in the backward's split h pass) in its prefetching schedule (state_t_wgmma_kernel's kPrefetch,
// gdn_state_wgmma.cuh: chunk c + 1's q, k, G, beta loaded during all of chunk c, its v during phases B and C, its T
// from phase C to its own phase B; the same products in the same order, so the same words: 0 differed on the
// emulator and on an H100). The default since the H100 A/Bs of 2026-12-07 (its kernel 1.8-3.2% faster, fwd+bwd 0.993
// of the bracketing defaults; with GLR_H_PREFETCH 0.970; tests/glrtorch with both on: 72 passed; docs/perf.md); 0:
// the plain schedule. Only with GLR_FWD_WGMMA on.
inline bool state_prefetch_requested() {
  static const bool on = env_flag("GLR_FWD_PREFETCH", true);
  return on;
}
// A forced split of the state passes (segments.cuh): segs 0 = the rule's (unset, empty or "auto"); "n" (1 to
// 4096): every sequence in n segments (min(n, its chunks); 1: never split), segs n, len 1; "L<m>" (m 1 to 65536):
// segments of m .. 2m - 1 chunks by length, sequences shorter than 2m chunks whole, segs 4096, len m. h_only (the
// backward's trailing "h", as "L64h" or "4h"): only the h pass splits, the dh pass runs unsplit.
struct SplitOverride {
  int segs = 0, len = 1;
  bool h_only = false;
};
inline SplitOverride env_split(const char* name, bool allow_h) {
  const char* e = std::getenv(name);
  SplitOverride o;
  if (e == nullptr || *e == '\0' || std::strcmp(e, "auto") == 0) return o;
  std::string v(e);
  if (allow_h && v.size() > 1 && v.back() == 'h') {
    o.h_only = true;
    v.pop_back();
  }
  const bool by_len = v.size() > 1 && v[0] == 'L';
  const char* d = v.c_str() + (by_len ? 1 : 0);
  char* end = nullptr;
  const long n = std::strtol(d, &end, 10);
  if (*end != '\0' || !(*d >= '0' && *d <= '9') || n < 1 || n > (by_len ? 65536 : 4096))
    throw InvalidArgument(name, std::string("is '") + e + "'; use 'auto', a count from 1 to 4096 or L and a length " +
                                    "in chunks from 1 to 65536" + (allow_h ? " (a trailing h: the h pass only)" : ""));
  o.segs = by_len ? 4096 : static_cast<int>(n);
  o.len = by_len ? static_cast<int>(n) : 1;
  return o;
}
// GLR_FORWARD_SPLIT: the forward's split-sequence state pass for every call (env_split; unset: the rule,
// gdn_fwd_split_plan).
inline SplitOverride forward_split_override() {
  static const SplitOverride o = env_split("GLR_FORWARD_SPLIT", false);
  return o;
}
// GLR_BACKWARD_SPLIT: the backward's split h and dh passes, the same values and a trailing h (unset: the rule,
// gdn_bwd_split_plan).
inline SplitOverride backward_split_override() {
  static const SplitOverride o = env_split("GLR_BACKWARD_SPLIT", true);
  return o;
}

}  // namespace glr::cuda::sm90
