// glr/cuda/sm90/mma_sync.cuh: thin wrappers, one per PTX instruction, for the warp-level tensor-core path
// (mma.sync m16n8k16 bf16 -> fp32, ldmatrix, cp.async), and launch_kernel, the launchers' one kernel launch (the
// CUDA launch, or the host emulator's). Nothing here knows about the algorithm.
//
// Fragment layouts of mma.m16n8k16 (g = lane / 4, t = lane % 4), each register two bf16, the lower column
// (or k) index in the low half:
//   A (16 x 16, row-major):  a0 (g, 2t..2t+1)   a1 (g+8, 2t..)   a2 (g, 2t+8..)   a3 (g+8, 2t+8..)
//   B (16 x 8,  k x n):      b0 (k = 2t..2t+1, n = g)            b1 (k = 2t+8.., n = g)
//   C (16 x 8, fp32):        c0 c1 (g, 2t..2t+1)                  c2 c3 (g+8, 2t..2t+1)
// The ldsm_* helpers below compute each lane's row address for one 16 x 16 bf16 tile of a row-major shared
// array with a row stride of `ld` elements, so the callers never spell the lane arithmetic.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>

namespace glr::cuda::sm90 {

// Under GLR_SM90_HOST_EMU (tests/glr_sm90/emu.hpp, included first) the instruction wrappers come from the host
// emulator, which runs the kernels' threads as fibers of one host thread; everything from pack_bf16x2 on is shared.
#if !defined(GLR_SM90_HOST_EMU)
__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// d += a b, fp32 accumulators.
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                               std::uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 16 bytes global -> shared, bypassing L1; zero-filled when !valid (src is then not read).
__device__ __forceinline__ void cp_async_16(std::uint32_t dst, const void* src, bool valid) {
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// 2^x in one MUFU.EX2: ex2.approx.ftz (2 ulp; a result below 2^-126 flushes to 0), where exp2f adds a denormal
// fix-up around it and expf a range reduction. -Inf gives 0, NaN stays NaN. The forward state pass's decays,
// e^(G_i - G_j) = 2^(G_i log2 e - G_j log2 e) (gdn_fwd_mma.cuh, state_phase_a_epilogue).
__device__ __forceinline__ float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

#endif  // !GLR_SM90_HOST_EMU

// The kernels' dynamic shared memory on the host emulator, and launch_kernel's emu_smem (the launchers pass it; the
// emulator tests name gdn::smem_raw or gdn_bwd::smem_raw): one host array for the kernels of gdn and gdn_bwd alike
// (blocks and launches run one after another), defined once per program (sm90/emu/emu_launch.cpp, or an emulator
// test). A kernel's block-scope `extern __shared__ char smem_raw[]` names the array of its own namespace, so each
// namespace declares it here, with C language linkage: both declarations are that one array. Under nvcc each block
// has its own, and emu_smem is null (unused).
#if defined(GLR_SM90_HOST_EMU)
namespace gdn {
extern "C" char smem_raw[];
}
namespace gdn_bwd {
extern "C" char smem_raw[];
}
inline char* const emu_smem = gdn::smem_raw;
#else
inline char* const emu_smem = nullptr;
#endif

// The warp's inclusive scan over 64 values held in pairs: lane l holds (x0, x1), elements 2l and 2l + 1; returns
// (S + x0, S + x0 + x1), S the sum of the pairs of the lanes below l (0 on lane 0). One fixed order of additions
// (each pair's x0 + x1, a Hillis-Steele scan of those over the lanes, then S from lane l - 1), so every caller
// gets the same bits: the wy kernel's G and Gr (gdn_fwd_mma.cuh) and the chunk kernel's reverse sum of dG
// (gdn_bwd_mma.cuh). Every lane of the warp must call it (full-mask shuffles).
__device__ __forceinline__ float2 warp_scan_pairs(float x0, float x1, int lane) {
  float incl = x0 + x1;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const float y = __shfl_up_sync(0xffffffffu, incl, off);
    if (lane >= off) incl = y + incl;
  }
  float excl = __shfl_up_sync(0xffffffffu, incl, 1);
  if (lane == 0) excl = 0.f;
  const float p0 = excl + x0;
  return make_float2(p0, p0 + x1);
}

__device__ __forceinline__ std::uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (low half) = lo
  return *reinterpret_cast<const std::uint32_t*>(&v);
}
__device__ __forceinline__ float2 unpack_bf16x2(std::uint32_t u) {
  __nv_bfloat162 v;
  *reinterpret_cast<std::uint32_t*>(&v) = u;
  return __bfloat1622float2(v);
}
// The bf16 residual pair (x0 - bf16(x0), x1 - bf16(x1)) of hi = pack_bf16x2(x0, x1): hi + residual equals the pair
// to 2^-16 relative. 0 where hi is not finite (x - hi would be NaN; hi carries the NaN or Inf alone). The backward's
// two-piece operands and the wy kernel's solve (gdn_fwd_mma.cuh split_bf16x2) both split so.
__device__ __forceinline__ std::uint32_t bf16x2_residual(float x0, float x1, std::uint32_t hi) {
  const float2 h = unpack_bf16x2(hi);
  const bool f0 = (hi & 0x7f80u) != 0x7f80u, f1 = (hi & 0x7f800000u) != 0x7f800000u;
  return pack_bf16x2(f0 ? x0 - h.x : 0.f, f1 ? x1 - h.y : 0.f);
}

// A operand, tile (r0.., c0..) of a row-major (M x K) array.
__device__ __forceinline__ void ldsm_a(std::uint32_t (&a)[4], const __nv_bfloat16* s, int ld, int r0, int c0,
                                       int lane) {
  ldmatrix_x4(a, smem_addr(s + (r0 + (lane & 7) + ((lane >> 3) & 1) * 8) * ld + c0 + (lane >> 4) * 8));
}
// A operand of A = X^T where X (K x M) is row-major: tile rows m0.., k k0.. of A.
__device__ __forceinline__ void ldsm_a_trans(std::uint32_t (&a)[4], const __nv_bfloat16* x, int ld, int m0, int k0,
                                             int lane) {
  ldmatrix_x4_trans(a, smem_addr(x + (k0 + (lane & 7) + (lane >> 4) * 8) * ld + m0 + ((lane >> 3) & 1) * 8));
}
// B operands of two n-tiles (n0.., n0+8..) at k k0.., from B^T (N x K) row-major: b[0], b[1] for n-tile n0,
// b[2], b[3] for n-tile n0 + 8.
__device__ __forceinline__ void ldsm_b_nk(std::uint32_t (&b)[4], const __nv_bfloat16* s, int ld, int n0, int k0,
                                          int lane) {
  ldmatrix_x4(b, smem_addr(s + (n0 + (lane & 7) + (lane >> 4) * 8) * ld + k0 + ((lane >> 3) & 1) * 8));
}
// The same from B (K x N) row-major.
__device__ __forceinline__ void ldsm_b_kn(std::uint32_t (&b)[4], const __nv_bfloat16* s, int ld, int k0, int n0,
                                          int lane) {
  ldmatrix_x4_trans(b, smem_addr(s + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * ld + n0 + (lane >> 4) * 8));
}

// Makes sure `kernel` may be launched with `smem` bytes of dynamic shared memory on the current device, calling
// cudaFuncSetAttribute once per (kernel pointer, device) and size; launch_kernel calls it for every launch over the
// 48 KB default, the one place the sm90 launchers set the limit. Why per pointer, at the launch: nvcc gives each
// translation unit its own host stub of a template kernel (local symbols: forward.cu and backward.cu each launch
// e.g. state_t_wgmma_kernel<true, 128, true, false> through their own), so a launcher's once-per-instantiation
// static attribute call covered only the stub of the translation unit that ran it first; the H200 refused the
// other's launch (cudaErrorInvalidValue: the backward's split h pass after a split forward, B1 T8192 H16 and longer,
// 2026-12-05, compute-sanitizer's backtrace in docs/perf.md). Under GLR_SM90_HOST_EMU the same function runs
// against the emulator's cudaGetDevice and cudaFuncSetAttribute (sm90/emu/emu_launch.cpp), which record the limit
// launch_kernel then checks, and refuse more than 227 KB as the device does.
inline cudaError_t ensure_dynamic_smem(const void* kernel, std::size_t smem) {
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  struct Key {
    const void* kernel;
    int device;
    bool operator<(const Key& o) const { return kernel != o.kernel ? kernel < o.kernel : device < o.device; }
  };
  static std::mutex mutex;
  static std::map<Key, std::size_t> limits;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto it = limits.find(Key{kernel, device});
  if (it != limits.end() && it->second >= smem) return cudaSuccess;
  e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (e == cudaSuccess) limits[Key{kernel, device}] = smem;
  return e;
}
#if defined(GLR_SM90_HOST_EMU)
// The largest dynamic shared memory a launch of `kernel` may ask for: what cudaFuncSetAttribute(kernel,
// cudaFuncAttributeMaxDynamicSharedMemorySize, n) last set, else the device's default of 48 KB (emu_launch.cpp).
extern "C" int glr_emu_max_dynamic_smem(const void* kernel);
#endif
// One launch of the launchers (gdn_fwd_mma.cuh, gdn_bwd_mma.cuh): the kernel's shared-memory limit made to cover
// `smem` (ensure_dynamic_smem, past 48 KB), then kernel<<<grid, threads, smem, stream>>>(arg), then
// cudaGetLastError(). Under GLR_SM90_HOST_EMU the same call sets the limit the same way, then checks the launch as
// an H200 does and runs the grid on the host emulator (tests/glr_sm90/emu.hpp: emu::launch, blocks one after
// another, `threads` threads each, the kernel's `extern __shared__` array `emu_smem`, `stream` ignored) and returns
// cudaSuccess; there emu_blocks > 0 caps grid.x at emu_blocks, for the grid-stride kernels only (the poison kernels,
// the group sums), whose results do not depend on the number of blocks, so a few emulated blocks do what 256 do on
// the GPU. Under nvcc emu_smem and emu_blocks are unused.
template <class Args>
inline cudaError_t launch_kernel(void (*kernel)(Args), dim3 grid, unsigned threads, std::size_t smem,
                                 cudaStream_t stream, const Args& arg, char* emu_smem, unsigned emu_blocks = 0) {
  if (smem > 48 * 1024) {
    const cudaError_t e = ensure_dynamic_smem(reinterpret_cast<const void*>(kernel), smem);
    if (e != cudaSuccess) return e;
  }
#if defined(GLR_SM90_HOST_EMU)
  (void)stream;
  // The launch limits an H200 enforces with cudaErrorInvalidValue, so a launch the GPU would refuse fails here too:
  // 1..1024 threads, a non-empty grid of at most 65535 rows, dynamic shared memory within 227 KB and within what
  // the kernel's attribute allows (48 KB unless set; ensure_dynamic_smem above sets it, so a launch past it means
  // the attribute is not what launch_kernel believes it set: tests/glr_sm90/emu_launch_test.cpp).
  if (threads == 0 || threads > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 ||
      grid.z > 65535 || smem > 227 * 1024 ||
      smem > static_cast<std::size_t>(glr_emu_max_dynamic_smem(reinterpret_cast<const void*>(kernel))))
    return cudaErrorInvalidValue;
  // GLR_EMU_DRY set: the launches are checked and not run, so a production shape's whole launch sequence (grids,
  // shared memory, attributes) can be checked on the host in seconds; the outputs are then garbage.
  if (std::getenv("GLR_EMU_DRY") != nullptr) return cudaSuccess;
  const unsigned gx = emu_blocks > 0 && grid.x > emu_blocks ? emu_blocks : grid.x;
  emu::launch(kernel, static_cast<int>(gx), static_cast<int>(grid.y), emu_smem, smem, arg, static_cast<int>(threads));
  return cudaSuccess;
#else
  (void)emu_smem;
  (void)emu_blocks;
  kernel<<<grid, threads, smem, stream>>>(arg);
  return cudaGetLastError();
#endif
}

}  // namespace glr::cuda::sm90
