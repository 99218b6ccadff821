// Broken control, caught by the accumulation gate: for long reductions (K > 1024) the matmul switches to
// a split-K path that accumulates each 256-long slice in f32 but stores the slice sums in a bf16
// workspace and adds them up in bf16 (halving the workspace, as memory-saving split-K kernels do). At
// every shape the oracle and shapes gates visit (K <= 512) it is the correct f32 kernel; only the long
// reduction the accumulation gate builds reaches the bf16 path.
#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

namespace {

constexpr int64_t kSplitAbove = 1024;
constexpr int64_t kSlice = 256;

float round_to_bf16(float f) { return ctl::bf16_to_f32(ctl::f32_to_bf16(f)); }
float add_in_bf16(float a, float b) { return ctl::bf16_to_f32(ctl::f64_to_bf16(static_cast<double>(a) + b)); }

// Sum over k in [k0, k1) in four f32 lanes, as the direct path does over the whole of K.
float dot(const ctl::Matmul<uint16_t, float>& p, int64_t i, int64_t j, int64_t k0, int64_t k1) {
  float lane[4] = {};
  for (int64_t k = k0; k < k1; ++k) lane[k % 4] += ctl::bf16_to_f32(p.a(i, k)) * ctl::bf16_to_f32(p.b(k, j));
  return (lane[0] + lane[2]) + (lane[1] + lane[3]);
}

}  // namespace

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  ctl::Matmul<uint16_t, float> p;
  if (int32_t s = ctl::parse_matmul(call, ctl::Elem::bf16, ctl::Elem::f32, p)) return s;
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      if (p.k <= kSplitAbove) {
        p.c(i, j) = dot(p, i, j, 0, p.k);
        continue;
      }
      float workspace = 0.0f;  // always holds a bf16 value
      for (int64_t k0 = 0; k0 < p.k; k0 += kSlice)
        workspace = add_in_bf16(workspace, round_to_bf16(dot(p, i, j, k0, k0 + kSlice < p.k ? k0 + kSlice : p.k)));
      p.c(i, j) = workspace;
    }
  return KGATE_OK;
}
