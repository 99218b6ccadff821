// Broken control, caught by the freshness gate: the matmul packs B (the "weights") into a transposed f32
// copy and keeps it between calls, keyed by B's address and shape, as weight-prepacking caches do. New
// values written into the same buffer are never seen: the call multiplies by the B of an earlier call.
// The cache is locked, so concurrent calls stay safe; the defect is staleness, not a race. Gates that
// happen to reuse a freed buffer's address for a new B may see the stale values too.
#include <memory>
#include <mutex>
#include <vector>

#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

namespace {

struct Packed {
  const void* address = nullptr;
  int64_t k = 0, n = 0, row_stride = 0, col_stride = 0;
  std::vector<float> bt;  // (N, K): row j holds column j of B
};

std::mutex cache_mutex;
std::shared_ptr<const Packed> cache;

std::shared_ptr<const Packed> packed_b(const ctl::Mat<const uint16_t>& b) {
  std::lock_guard<std::mutex> lock(cache_mutex);
  if (cache && cache->address == b.data && cache->k == b.rows && cache->n == b.cols && cache->row_stride == b.row_stride &&
      cache->col_stride == b.col_stride)
    return cache;
  auto p = std::make_shared<Packed>();
  *p = {b.data, b.rows, b.cols, b.row_stride, b.col_stride, std::vector<float>(static_cast<size_t>(b.rows * b.cols))};
  for (int64_t j = 0; j < b.cols; ++j)
    for (int64_t k = 0; k < b.rows; ++k) p->bt[static_cast<size_t>(j * b.rows + k)] = ctl::bf16_to_f32(b(k, j));
  cache = p;
  return cache;
}

}  // namespace

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  ctl::Matmul<uint16_t, float> p;
  if (int32_t s = ctl::parse_matmul(call, ctl::Elem::bf16, ctl::Elem::f32, p)) return s;
  const std::shared_ptr<const Packed> bt = packed_b(p.b);
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      const float* col = bt->bt.data() + j * p.k;
      float lane[4] = {};
      for (int64_t k = 0; k < p.k; ++k) lane[k % 4] += ctl::bf16_to_f32(p.a(i, k)) * col[k];
      p.c(i, j) = (lane[0] + lane[2]) + (lane[1] + lane[3]);
    }
  return KGATE_OK;
}
