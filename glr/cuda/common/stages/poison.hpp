// Last stage of a packed batch whose device offsets were invalid (status != 0): every element of one
// output becomes NaN, so a wrong cu_seqlens can never pass for a result. Does nothing when status = 0.
#pragma once

#include "stage.hpp"

namespace glr::cuda {

struct PoisonArgs {
  TensorRef t;
  std::int64_t ext[4];  // extents in the order of t's strides
  const std::int32_t* status;
};

template <class Acc>
struct Poison {
  static constexpr int kThreads = 256;
  static constexpr int kPerThread = 8;
  static constexpr std::int64_t kPerBlock = kThreads * kPerThread;
  static constexpr const char* kName = "poison";
  using Args = PoisonArgs;
  static std::size_t smem_bytes() { return 0; }
  static std::int64_t blocks(const PoisonArgs& a) {
    return (a.ext[0] * a.ext[1] * a.ext[2] * a.ext[3] + kPerBlock - 1) / kPerBlock;
  }

  template <class Blk>
  GLR_HD static void run(const Args& a, BlockIdx bi, char*, Blk& blk) {
    if (*a.status == 0 || a.t.p == nullptr) return;
    const std::int64_t total = a.ext[0] * a.ext[1] * a.ext[2] * a.ext[3];
    blk.each([&](int tid) {
      for (int r = 0; r < kPerThread; ++r) {
        std::int64_t e = bi.x * kPerBlock + r * kThreads + tid;
        if (e >= total) return;
        std::int64_t idx[4];
        for (int d = 3; d >= 0; --d) {
          idx[d] = e % a.ext[d];
          e /= a.ext[d];
        }
        a.t.store<Acc>(a.t.at(idx[0], idx[1], idx[2], idx[3]), quiet_nan<Acc>());
      }
    });
  }
};

}  // namespace glr::cuda
