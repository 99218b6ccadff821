// tests/glr_sm90/emu_launch_probe.cpp: launch_kernel (glr/cuda/sm90/mma_sync.cuh) on the host emulator, with small
// probe kernels: the launch rules an H200 enforces, and the dynamic shared-memory limit that launch_kernel sets itself
// (ensure_dynamic_smem, the device build's function, against emu_launch.cpp's cudaFuncSetAttribute). Its own
// translation unit (the emulator's headers redefine __device__ and friends); emu_launch_test.cpp calls probe_checks.
// clang-format off
#include "emu.hpp"
#include "../../glr/cuda/sm90/mma_sync.cuh"
// clang-format on

#include <cstdio>

extern "C" int glr_emu_forget_dynamic_smem_limits();

namespace {

using glr::cuda::sm90::emu_smem;
using glr::cuda::sm90::glr_emu_max_dynamic_smem;
using glr::cuda::sm90::launch_kernel;

struct ProbeArgs {
  int* ran;  // blocks run
};
// One instantiation per check, so that each starts with no limit set.
template <int kId>
__global__ void probe_kernel(ProbeArgs a) {
  if (threadIdx.x == 0) ++*a.ran;
}

int failures = 0;
void expect(bool ok, const char* what) {
  std::printf("  %s: %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) ++failures;
}
template <int kId>
std::size_t limit_of() {
  return static_cast<std::size_t>(glr_emu_max_dynamic_smem(reinterpret_cast<const void*>(&probe_kernel<kId>)));
}

}  // namespace

// Returns the number of failed checks.
int probe_checks() {
  std::printf("launch_kernel's rules on the emulator (probe kernels)\n");
  int ran = 0;
  const ProbeArgs a{&ran};
  constexpr std::size_t KB = 1024;
  auto launch = [&](auto* k, dim3 grid, unsigned threads, std::size_t smem) {
    ran = 0;
    return launch_kernel(k, grid, threads, smem, nullptr, a, emu_smem);
  };
  cudaError_t e = launch(&probe_kernel<0>, dim3(2, 1), 32, 0);
  expect(e == cudaSuccess && ran == 2, "32 threads, grid (2, 1), no shared memory: runs both blocks");
  e = launch(&probe_kernel<0>, dim3(1), 0, 0);
  expect(e == cudaErrorInvalidValue && ran == 0, "0 threads: refused");
  e = launch(&probe_kernel<0>, dim3(1), 1056, 0);
  expect(e == cudaErrorInvalidValue && ran == 0, "1056 threads: refused");
  e = launch(&probe_kernel<0>, dim3(0, 1), 32, 0);
  expect(e == cudaErrorInvalidValue && ran == 0, "an empty grid: refused");
  e = launch(&probe_kernel<0>, dim3(1, 65536), 32, 0);
  expect(e == cudaErrorInvalidValue && ran == 0, "65536 grid rows: refused");

  // The limit launch_kernel sets itself: no launcher sets an attribute any more.
  expect(limit_of<1>() == 48 * KB, "a kernel never launched: the 48 KB default");
  e = launch(&probe_kernel<1>, dim3(1), 32, 48 * KB);
  expect(e == cudaSuccess && ran == 1 && limit_of<1>() == 48 * KB, "48 KB: runs, no attribute set");
  e = launch(&probe_kernel<1>, dim3(1), 32, 100 * KB);
  expect(e == cudaSuccess && ran == 1 && limit_of<1>() == 100 * KB, "100 KB: runs, the attribute set to 100 KB");
  e = launch(&probe_kernel<1>, dim3(1), 32, 64 * KB);
  expect(e == cudaSuccess && ran == 1 && limit_of<1>() == 100 * KB, "64 KB after: runs, the attribute left at 100 KB");
  e = launch(&probe_kernel<1>, dim3(1), 32, 227 * KB);
  expect(e == cudaSuccess && ran == 1 && limit_of<1>() == 227 * KB, "227 KB (the H200's opt-in maximum): runs");
  e = launch(&probe_kernel<2>, dim3(1), 32, 227 * KB + 16);
  expect(e == cudaErrorInvalidValue && ran == 0 && limit_of<2>() == 48 * KB,
         "227 KB + 16 bytes: the attribute refused, so the launch");

  // Positive control: the device's attribute is not what launch_kernel set (what each translation unit's own host
  // stub of a template kernel did to the launchers' static attribute calls on the H200, 2026-12-05). launch_kernel
  // believes 100 KB set and does not set it again; the launch must be refused, not run.
  e = launch(&probe_kernel<3>, dim3(1), 32, 100 * KB);
  expect(e == cudaSuccess && ran == 1, "100 KB on a fresh kernel: runs");
  const int forgotten = glr_emu_forget_dynamic_smem_limits();
  expect(forgotten >= 2 && limit_of<3>() == 48 * KB, "every kernel's attribute back to 48 KB on the device's side");
  e = launch(&probe_kernel<3>, dim3(1), 32, 100 * KB);
  expect(e == cudaErrorInvalidValue && ran == 0, "control: 100 KB past the device's 48 KB attribute: refused");
  e = launch(&probe_kernel<3>, dim3(1), 32, 48 * KB);
  expect(e == cudaSuccess && ran == 1, "48 KB then: runs");
  return failures;
}
