// tests/glr_sm90/wgmma_emu_test.cpp: the wgmma / mbarrier / bulk-copy wrappers (glr/cuda/sm90/wgmma.cuh) on the
// host emulator (emu_wgmma.hpp), no GPU. The kernels and the case list are tests/glr_sm90/wgmma_case.cuh, the
// same source bench/glr/sm90_wgmma_check.cu runs on an H200: every swizzle mode (none, 32B, 64B, 128B) x B
// K-major / MN-major x A from shared memory (K-major, MN-major) or registers x N 64, 128 x both layout orders,
// 4 accumulated k-steps, each against a float64 matmul of the same bf16 values (bound 2^-16 sum |a b| per
// element); then deliberate faults (B's SBO + 16 bytes, B's or A's swizzle mode, B's transpose bit), each of
// which must give a result outside the bound; then 6 mbarrier phases of 128 arrivals.
// Build and run: ctest -R glr_sm90_wgmma_emu, or
//   g++ -std=c++20 -O2 -DGLR_SM90_HOST_EMU -I/usr/local/cuda/include tests/glr_sm90/wgmma_emu_test.cpp -lpthread
#include "emu_wgmma.hpp"

#include "wgmma_case.cuh"

namespace glr::wgtest {
alignas(1024) char wg_smem_raw[kSmemBytes];
}

int main() {
  using namespace glr::wgtest;
  emu::wg::smem_limit = kSmemBytes;
  int failures = run_specs([](const Spec& s, Case& c, const std::vector<std::uint16_t>& a,
                              const std::vector<std::uint16_t>& b, std::vector<float>& d) {
    c.a = reinterpret_cast<const __nv_bfloat16*>(a.data());
    c.b = reinterpret_cast<const __nv_bfloat16*>(b.data());
    c.d = d.data();
    with_kernel(s, [&](void (*k)(Case)) { emu::launch(k, 1, 1, wg_smem_raw, kSmemBytes, c); });
  });
  std::vector<int> errors(128, -1);
  emu::wg::smem_limit = kMbarSmemBytes;
  emu::launch(&mbarrier_phase_kernel, 1, 1, wg_smem_raw, kMbarSmemBytes, MbarCase{6, errors.data()});
  int bad = 0;
  for (int e : errors) bad += e != 0;
  std::printf("mbarrier: 6 phases x 128 arrivals, %d threads saw a wrong slot or did not finish  %s\n", bad,
              bad ? "FAIL" : "PASS");
  failures += bad != 0;
  std::printf("%s\n", failures ? "FAILED" : "ALL PASS");
  return failures ? 1 : 0;
}
