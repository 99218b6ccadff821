// bench/glr/sm90_wgmma_check.cu: the wgmma / mbarrier / bulk-copy wrappers (glr/cuda/sm90/wgmma.cuh) on a real
// Hopper GPU (H200), the same kernels and cases as the host emulator's tests/glr_sm90/wgmma_emu_test.cpp
// (tests/glr_sm90/wgmma_case.cuh): every swizzle mode x B K-/MN-major x A from shared memory (K-, MN-major) or
// registers x N 64, 128 x both layout orders, 4 accumulated k-steps, each against a float64 matmul of the same
// bf16 values with the same bound (2^-16 sum_k |a_ik b_kj| per element), one line per case ending in PASS or
// FAIL; then the deliberate faults (must come out wrong), 6 mbarrier phases of 128 arrivals and the named
// barriers (bar.sync / bar.arrive); TMA 2-D tile loads into the canonical layouts feeding wgmma (every swizzle,
// rows outside the map zero-filled; each tile element checked at its address; the tile stored back by TMA
// stores, clipped to the map); the pipelined producer/consumer GEMM (a TMA producer warpgroup, a ring of 2-4
// stages on full/empty mbarriers, 1-2 wgmma consumer warpgroups, setmaxnreg 40/232 in the 384-thread kernel;
// 9 cases, K up to 1024, same bound; its faults are emulator-only races, not run here).
// NOT YET RUN ON A GPU (none of it, the pipelined GEMM included): written and compiled (sm_90a, SASS checked
// for HGMMA) on 2026-12-04 in sessions with no GPU lent; the first GPU session runs bench/glr/sm90_wgmma_check.sh. Until then the canonical layouts,
// the descriptor encoding and the accumulator layout are checked only against the emulator, which encodes the
// same reading of the PTX ISA: agreement here is what validates the emulator for the wgmma kernels.
// Exit status: the number of failed cases (0: all pass), 2 on a CUDA error.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../../tests/glr_sm90/wgmma_case.cuh"

#define CK(x)                                                                                   \
  do {                                                                                          \
    cudaError_t e_ = (x);                                                                       \
    if (e_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(e_), __FILE__, __LINE__, \
                   cudaGetErrorString(e_));                                                     \
      std::exit(2);                                                                             \
    }                                                                                           \
  } while (0)

// Never launched: makes ptxas assemble setmaxnreg (a producer warpgroup gives registers back, a consumer takes
// them), which the checks do not run (it needs a kernel whose register budget allows the increase).
__global__ void __launch_bounds__(256, 1) setmaxnreg_compile_only(int* out) {
  if (threadIdx.x < 128) {
    glr::cuda::sm90::setmaxnreg_dec<40>();
  } else {
    glr::cuda::sm90::setmaxnreg_inc<232>();
  }
  out[threadIdx.x] = static_cast<int>(threadIdx.x);
}

int main() {
  using namespace glr::wgtest;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  if (prop.major != 9) {
    std::printf("not a Hopper GPU: wgmma needs sm_90a\n");
    return 2;
  }
  void *da = nullptr, *db = nullptr, *dd = nullptr;
  CK(cudaMalloc(&da, 64 * kMaxK * 2));
  CK(cudaMalloc(&db, kMaxK * 128 * 2));
  CK(cudaMalloc(&dd, 64 * 128 * 4));
  int failures = run_specs([&](const Spec& s, Case& c, const std::vector<std::uint16_t>& a,
                               const std::vector<std::uint16_t>& b, std::vector<float>& d) {
    CK(cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemset(dd, 0xff, d.size() * 4));  // NaN: an unwritten output shows
    c.a = static_cast<const __nv_bfloat16*>(da);
    c.b = static_cast<const __nv_bfloat16*>(db);
    c.d = static_cast<float*>(dd);
    with_kernel(s, [&](void (*k)(Case)) {
      CK(cudaFuncSetAttribute(reinterpret_cast<const void*>(k), cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(kSmemBytes)));
      k<<<1, 128, kSmemBytes>>>(c);
      CK(cudaGetLastError());
      CK(cudaDeviceSynchronize());
    });
    CK(cudaMemcpy(d.data(), dd, d.size() * 4, cudaMemcpyDeviceToHost));
  }, false);
  {  // TMA -> wgmma (maps on the device copies of A and B)
    int* dmis = nullptr;
    void* dout = nullptr;
    CK(cudaMalloc(&dmis, 128 * sizeof(int)));
    CK(cudaMalloc(&dout, 64 * kMaxK * 2));
    failures += run_tma_specs([&](TmaCase& c, const std::vector<std::uint16_t>& a,
                                  const std::vector<std::uint16_t>& b, std::vector<float>& d,
                                  std::vector<int>& mismatch, std::vector<std::uint16_t>& a_out) {
      using glr::cuda::sm90::make_tma_map_2d;
      CK(cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
      CK(cudaMemset(dd, 0xff, d.size() * 4));
      CK(cudaMemset(dmis, 0xff, 128 * sizeof(int)));
      const int wa = c.sw == glr::cuda::sm90::Swizzle::None
                         ? 8
                         : static_cast<int>(glr::cuda::sm90::swizzle_bytes(c.sw) / 2);
      CK(cudaMemcpy(dout, a_out.data(), a_out.size() * 2, cudaMemcpyHostToDevice));
      if (!make_tma_map_2d(c.ma, da, c.a_rows, c.k, c.k * 2, 64, wa, c.sw) ||
          !make_tma_map_2d(c.mb, db, c.k, c.n, c.n * 2, c.k, wa, c.sw) ||
          !make_tma_map_2d(c.mo, dout, c.a_rows, c.k, c.k * 2, 64, wa, c.sw))
        return false;
      c.a = static_cast<const __nv_bfloat16*>(da);
      c.b = static_cast<const __nv_bfloat16*>(db);
      c.d = static_cast<float*>(dd);
      c.mismatch = dmis;
      auto launch = [&](void (*k)(const TmaCase)) {
        CK(cudaFuncSetAttribute(reinterpret_cast<const void*>(k), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(kSmemBytes)));
        k<<<1, 128, kSmemBytes>>>(c);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
      };
      launch(c.n == 64 ? &tma_wgmma_kernel<64> : &tma_wgmma_kernel<128>);
      CK(cudaMemcpy(d.data(), dd, d.size() * 4, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(mismatch.data(), dmis, 128 * sizeof(int), cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(a_out.data(), dout, a_out.size() * 2, cudaMemcpyDeviceToHost));
      return true;
    });
  }
  {  // the pipelined producer/consumer GEMM (blocks of 256 / 384 threads, maps on device copies of A and B)
    constexpr int kMaxM = 128, kMaxPipeK = 1024, kMaxPipeN = 128;
    void *pa = nullptr, *pb = nullptr, *pc = nullptr;
    CK(cudaMalloc(&pa, static_cast<std::size_t>(kMaxM) * kMaxPipeK * 2));
    CK(cudaMalloc(&pb, static_cast<std::size_t>(kMaxPipeK) * kMaxPipeN * 2));
    CK(cudaMalloc(&pc, static_cast<std::size_t>(kMaxM) * kMaxPipeN * 4));
    failures += run_pipe_specs([&](const PipeSpec& s, PipeCase& c, const std::vector<std::uint16_t>& a,
                                   const std::vector<std::uint16_t>& b, std::vector<float>& out) {
      using glr::cuda::sm90::make_tma_map_2d;
      if (c.m > kMaxM || c.k > kMaxPipeK || c.n > kMaxPipeN) return false;
      CK(cudaMemcpy(pa, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(pb, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
      CK(cudaMemset(pc, 0xff, out.size() * 4));
      if (!make_tma_map_2d(c.ma, pa, c.m, c.k, c.k * 2, c.m, 64, glr::cuda::sm90::Swizzle::B128) ||
          !make_tma_map_2d(c.mb, pb, c.k, c.n, c.n * 2, 64, 64, glr::cuda::sm90::Swizzle::B128))
        return false;
      c.c = static_cast<float*>(pc);
      with_pipe_kernel(s, [&](void (*k)(const PipeCase)) {
        CK(cudaFuncSetAttribute(reinterpret_cast<const void*>(k), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(kPipeSmemBytes)));
        k<<<1, 128 * (s.nc + 1), kPipeSmemBytes>>>(c);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
      });
      CK(cudaMemcpy(out.data(), pc, out.size() * 4, cudaMemcpyDeviceToHost));
      return true;
    }, false);
  }
  int* derr = nullptr;
  CK(cudaMalloc(&derr, 128 * sizeof(int)));
  CK(cudaMemset(derr, 0xff, 128 * sizeof(int)));
  mbarrier_phase_kernel<<<1, 128, kMbarSmemBytes>>>(MbarCase{6, derr});
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<int> errors(128);
  CK(cudaMemcpy(errors.data(), derr, 128 * sizeof(int), cudaMemcpyDeviceToHost));
  failures += barrier_verdict("mbarrier: 6 phases x 128 arrivals", "a wrong slot or did not finish", errors);
  CK(cudaMemset(derr, 0xff, 128 * sizeof(int)));
  named_barrier_kernel<<<1, 128, kMbarSmemBytes>>>(MbarCase{0, derr});
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(errors.data(), derr, 128 * sizeof(int), cudaMemcpyDeviceToHost));
  failures += barrier_verdict("named barriers: two 64-thread groups x 4 rounds, producer/consumer warps x 3 rounds",
                              "a wrong slot", errors);
  std::printf("%s\n", failures ? "FAILED" : "ALL PASS");
  return failures > 100 ? 100 : failures;
}
