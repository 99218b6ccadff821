// Broken control, caught by the stream gate: the matmul hands its arguments (pointers, strides, sizes) to
// its worker threads through one static parameter block that they read as they go, as CUDA code that
// passes arguments through a __constant__ symbol written before each launch does. One call at a time it
// is correct. When two calls are in flight (two streams, or two threads on the CPU), the second overwrites
// the block while the first call's workers are still using it: the first call's output is left partly
// unwritten and the second's is written twice.
#include <thread>
#include <vector>

#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

namespace {

constexpr int kWorkers = 4;
ctl::Matmul<uint16_t, float> launch;  // shared by every call in the process: the defect

void rows(int worker) {
  const ctl::Matmul<uint16_t, float>& p = launch;
  for (int64_t i = worker; i < p.m; i += kWorkers) {
    for (int64_t j = 0; j < p.n; ++j) {
      float lane[4] = {};
      for (int64_t k = 0; k < p.k; ++k) lane[k % 4] += ctl::bf16_to_f32(p.a(i, k)) * ctl::bf16_to_f32(p.b(k, j));
      p.c(i, j) = (lane[0] + lane[2]) + (lane[1] + lane[3]);
    }
    // Between rows the worker lets others run, as spin-then-yield pools do; a second call released at
    // the same moment gets its turn while this one is still reading the block.
    std::this_thread::yield();
  }
}

}  // namespace

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  ctl::Matmul<uint16_t, float> p;
  if (int32_t s = ctl::parse_matmul(call, ctl::Elem::bf16, ctl::Elem::f32, p)) return s;
  launch = p;
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) workers.emplace_back(rows, w);
  for (std::thread& t : workers) t.join();
  return KGATE_OK;
}
