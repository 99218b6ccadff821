// glr/cuda/sm90/wgmma.cuh: thin wrappers, one per PTX instruction, for the warpgroup tensor-core path on sm_90a
// (wgmma.mma_async m64nNk16 f32 += bf16 x bf16, its fence / commit_group / wait_group, the shared-memory matrix
// descriptor, mbarrier, named barriers, setmaxnreg, the 1-D bulk copy and the 2-D TMA tile load that complete on
// an mbarrier). Nothing here knows about the algorithm. Build with -gencode=arch=compute_90a,code=sm_90a (wgmma
// needs the "a" target). Checked on the host emulator (ctest glr_sm90_wgmma_emu); the GPU check of the same
// kernels, bench/glr/sm90_wgmma_check.sh, compiled but NOT YET RUN (no GPU in the session that wrote this).
// Under GLR_SM90_HOST_EMU (tests/glr_sm90/emu_wgmma.hpp, included first) the instruction wrappers come from the
// host emulator; the descriptor encoding and the layout helpers below the #endif are shared.
//
// Shapes (PTX ISA 9.7.15, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"): one warpgroup (128
// consecutive threads starting at a multiple of 128; all of them execute each wgmma) computes
// D (64 x N) += A (64 x 16) B (16 x N); A from shared memory (descriptor) or registers, B from shared memory
// (descriptor). The scale-a / scale-b immediates are fixed at 1 (no negation).
//
// Accumulator layout (fp32, N / 2 registers a thread; warp r = (thread % 128) / 32, g = lane / 4, t = lane % 4):
//   d[4j + 0] = D(16r + g,     8j + 2t)      d[4j + 1] = D(16r + g,     8j + 2t + 1)
//   d[4j + 2] = D(16r + g + 8, 8j + 2t)      d[4j + 3] = D(16r + g + 8, 8j + 2t + 1)      j = 0 .. N/8 - 1
// i.e. each warp owns 16 rows and, per 8-column block j, the mma.m16n8 C fragment (mma_sync.cuh).
// A from registers (4 x .b32, two bf16 each, the lower k in the low half), rows of warp r:
//   a[0] = A(16r + g, 2t..2t+1)   a[1] = A(16r + g + 8, 2t..)   a[2] = A(16r + g, 2t+8..)
//   a[3] = A(16r + g + 8, 2t+8..)  (the mma.m16n8k16 A fragment of the warp's 16 rows).
//
// Shared-memory operands are described by a 64-bit matrix descriptor (PTX "Matrix Descriptor Format"):
//   bits  0-13  start address >> 4          bits 16-29  leading-dimension byte offset (LBO) >> 4
//   bits 32-45  stride-dimension byte offset (SBO) >> 4
//   bits 49-51  base offset (0 here: every swizzled tile starts on its pattern's 256/512/1024-byte boundary,
//               k-steps inside a pattern move the start address, and the swizzle acts on address bits)
//   bits 62-63  swizzle: 0 none (interleave), 1 128B, 2 64B, 3 32B.
// Canonical layouts for 16-bit elements (a "core matrix" is 8 rows of 16 bytes; "row" = the operand's M or N
// index r, "k" its K index; byte offsets from the start address, before the swizzle):
//   K-major,  none:      (r%8)*16 + (r/8)*SBO + (k/8)*LBO + (k%8)*2
//   K-major,  W-byte:    (r%8)*W  + (r/8)*SBO + k*2                       (LBO unused; 16 k = 32 B fit in W)
//   MN-major, none:      (r%8)*2  + (r/8)*SBO + (k%8)*16 + (k/8)*LBO
//   MN-major, W-byte:    (r%(W/2))*2 + (r/(W/2))*LBO + (k%8)*W + (k/8)*SBO
// and the W-byte swizzle XORs address bits [4, 4+log2(W/16)) (the 16-byte chunk) with bits [7, 7+log2(W/16))
// (the 128-byte line): chunk c of row q goes to c ^ (q % 8) for 128B, c ^ ((q / 2) % 4) for 64B, c ^ ((q / 4) % 2)
// for 32B; the pattern repeats every 8W bytes (1024, 512, 256), on which a tile's atoms must start.
// K-major = the K index is contiguous (transpose bit 0: A row-major, B stored as B^T row-major);
// MN-major = M (for A) or N (for B) contiguous (transpose bit 1; only with shared-memory operands).
//
// Ordering (PTX): wgmma.fence before the first wgmma and whenever the accumulator or A registers were written
// by other instructions since; shared memory written by ordinary stores needs fence.proxy.async (each writing
// thread) and a barrier before a wgmma reads it; results are readable after commit_group + wait_group. The
// accumulator registers must not be touched while a wgmma on them is in flight (wgmma_fence_operand keeps the
// compiler from moving accesses across the asm: before wgmma_fence and after wgmma_wait, see there).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "mma_sync.cuh"  // smem_addr, cp_async_16 (load_sw128)
#if !defined(GLR_SM90_HOST_EMU)
#include <cuda.h>  // CUtensorMap (types only: the encoder is looked up at run time, no -lcuda)
#include <cuda_runtime.h>
#include <cudaTypedefs.h>
#endif

namespace glr::cuda::sm90 {

enum class Swizzle : std::uint32_t { None = 0, B128 = 1, B64 = 2, B32 = 3 };  // the descriptor's encoding

// Bytes of one swizzle row (W); 16 for None (one core-matrix row).
__host__ __device__ constexpr std::uint32_t swizzle_bytes(Swizzle s) {
  return s == Swizzle::B128 ? 128u : s == Swizzle::B64 ? 64u : s == Swizzle::B32 ? 32u : 16u;
}

#if !defined(GLR_SM90_HOST_EMU)

// ---- warpgroup MMA ----
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Wait until at most N committed groups are pending.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// A register fence (no instruction): keeps the compiler from moving reads or writes of the accumulators (or of
// register-A fragments) across it. Each wgmma group is bracketed by them, as CUTLASS's warpgroup_fence_operand:
//   wgmma_fence_operand(d) [and each A fragment];  wgmma_fence();  wgmma_*(d, ..) ...;  wgmma_commit();
//   wgmma_wait<N>();  wgmma_fence_operand(d);
// The first pins the threads' last writes of d (zeroing, scaling) before wgmma.fence: without it the compiler may
// sink them between wgmma.fence and the wgmma, and ptxas then injects a warpgroup.arrive of its own (C7519,
// "warpgroup.arrive is injected ... to allow use of registers in GMMA"), which waits for every wgmma in flight.
template <int R>
__device__ __forceinline__ void wgmma_fence_operand(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int R>
__device__ __forceinline__ void wgmma_fence_operand(std::uint32_t (&a)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+r"(a[i])::"memory");
}
// Shared memory written by ordinary stores, to be read by wgmma or a bulk copy (the async proxy).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// The accumulators' operand names and constraints, d[0..31] (N = 64) and d[32..63] (the rest of N = 128).
#define GLR_WGMMA_D_NAMES_LO "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define GLR_WGMMA_D_NAMES_HI ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define GLR_WGMMA_D_LO \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define GLR_WGMMA_D_HI \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// ---- N = 64: 32 accumulators
#define GLR_WGMMA_SS_64(TA, TB) asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n" \
  "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" GLR_WGMMA_D_NAMES_LO "}, %32, %33, p, 1, 1, %35, %36;\n}\n" \
  : GLR_WGMMA_D_LO : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB))

#define GLR_WGMMA_RS_64(TB) asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n" \
  "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" GLR_WGMMA_D_NAMES_LO "}, {%32, %33, %34, %35}, %36, p, " \
  "1, 1, %38;\n}\n" \
  : GLR_WGMMA_D_LO : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d), "n"(TB))

// ---- N = 128: 64 accumulators
#define GLR_WGMMA_SS_128(TA, TB) asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n" \
  "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" GLR_WGMMA_D_NAMES_LO GLR_WGMMA_D_NAMES_HI \
  "}, %64, %65, p, 1, 1, %67, %68;\n}\n" \
  : GLR_WGMMA_D_LO, GLR_WGMMA_D_HI : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB))

#define GLR_WGMMA_RS_128(TB) asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n" \
  "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" GLR_WGMMA_D_NAMES_LO GLR_WGMMA_D_NAMES_HI \
  "}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n" \
  : GLR_WGMMA_D_LO, GLR_WGMMA_D_HI : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d), "n"(TB))

// D (64 x N) = A B + (scale_d ? D : 0), A and B from shared memory. TA / TB: transpose bits (0 K-major, 1
// MN-major). da, db warpgroup-uniform.
template <int N, int TA, int TB>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], std::uint64_t da, std::uint64_t db, int scale_d) {
  static_assert(N == 64 || N == 128, "wgmma_ss: N = 64 or 128 (add the asm for other N)");
  if constexpr (N == 64)
    GLR_WGMMA_SS_64(TA, TB);
  else
    GLR_WGMMA_SS_128(TA, TB);
}
// The same with A from registers (the layout above); B from shared memory. ptxas (CUDA 13.0) reports C7515
// ("wgmma.mma_async instructions are serialized ...") on the check's register-A kernels, whose k-loop is not
// unrolled and reloads A between wgmmas. Unrolled, with the A fragments loaded before the first wgmma_fence, 4
// chained m64n64 register-A wgmmas and one commit assemble without it (ptxas 13.0, a throwaway kernel).
template <int N, int TB>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const std::uint32_t (&a)[4], std::uint64_t db,
                                         int scale_d) {
  static_assert(N == 64 || N == 128, "wgmma_rs: N = 64 or 128 (add the asm for other N)");
  if constexpr (N == 64)
    GLR_WGMMA_RS_64(TB);
  else
    GLR_WGMMA_RS_128(TB);
}
#undef GLR_WGMMA_SS_64
#undef GLR_WGMMA_RS_64
#undef GLR_WGMMA_SS_128
#undef GLR_WGMMA_RS_128
#undef GLR_WGMMA_D_NAMES_LO
#undef GLR_WGMMA_D_NAMES_HI
#undef GLR_WGMMA_D_LO
#undef GLR_WGMMA_D_HI

// ---- mbarrier (shared::cta, 8 bytes, 8-byte aligned) ----
__device__ __forceinline__ void mbarrier_init(std::uint32_t bar, std::uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Make the initialised barriers visible to the async proxy (bulk copies) and the other threads; then a barrier.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbarrier_arrive(std::uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Raise the phase's expected transaction bytes by `bytes`, then arrive.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(std::uint32_t bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// True once the phase of parity `parity` has completed (the barrier is in the next phase).
__device__ __forceinline__ bool mbarrier_try_wait_parity(std::uint32_t bar, std::uint32_t parity) {
  std::uint32_t ok;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(ok)
      : "r"(bar), "r"(parity)
      : "memory");
  return ok != 0;
}

// ---- bulk copy (TMA unit, 1-D, no tensor map): `bytes` (a multiple of 16; src, dst 16-byte aligned) global ->
// shared, completing `bytes` transactions on the mbarrier `bar`.
__device__ __forceinline__ void bulk_copy_g2s(std::uint32_t dst, const void* src, std::uint32_t bytes,
                                              std::uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}

// ---- named barriers and register reallocation, for producer / consumer warpgroups ----
// bar.sync: wait until `count` threads (a multiple of 32, whole warps) have arrived at barrier `id` (1-15; 0 is
// __syncthreads); bar.arrive: count this warp's threads in without waiting (a producer signalling consumers).
__device__ __forceinline__ void named_barrier_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
// setmaxnreg (warpgroup-wide, every warp of the warpgroup executes it): R a multiple of 8 in [24, 256]; the
// kernel must be built with a register limit (__launch_bounds__ / -maxrregcount) the CTA can hold.
template <int R>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}

// ---- TMA, 2-D tiled bf16 tensor (cp.async.bulk.tensor.2d): the box {box_cols (contiguous), box_rows} at
// element (c0 column, c1 row) of a row-major global matrix lands at shared `dst` as box_rows rows of box_cols * 2
// bytes, with the map's swizzle on the shared address bits (the same swizzle as the wgmma descriptor's; dst
// aligned to 1024 B for 128B, 512 for 64B, 256 for 32B, 128 without); elements outside the matrix are zeros;
// the full box's bytes complete on `bar`. A box of W/2 columns x R rows (W the swizzle width) is one K-major
// W-swizzled slab of CanonTile (or one MN-major atom, with rows = k); without swizzle, a box of 8 columns is a
// column of core matrices.
struct TmaMap2d {  // CUtensorMap carries its own alignment
  CUtensorMap map;
};
// Host: the map of a rows x cols bf16 matrix (row stride `row_bytes`, a multiple of 16) with boxes of
// box_cols x box_rows (box_cols * 2 <= the swizzle width, a multiple of 16 bytes; both <= 256). False if the
// driver refuses (the reason is not kept).
inline bool make_tma_map_2d(TmaMap2d& m, const void* global, std::uint64_t rows, std::uint64_t cols,
                            std::uint64_t row_bytes, std::uint32_t box_rows, std::uint32_t box_cols, Swizzle s) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  if (encode == nullptr) return false;
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {row_bytes};
  const cuuint32_t box[2] = {box_cols, box_rows};
  const cuuint32_t estr[2] = {1, 1};
  const CUtensorMapSwizzle sw = s == Swizzle::B128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                : s == Swizzle::B64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                : s == Swizzle::B32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                                    : CU_TENSOR_MAP_SWIZZLE_NONE;
  return encode(&m.map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(global), dims, strides, box, estr,
                CU_TENSOR_MAP_INTERLEAVE_NONE, sw, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}
// `m` must live in parameter, constant or global memory (a __grid_constant__ kernel parameter).
__device__ __forceinline__ void tma_load_2d(std::uint32_t dst, const TmaMap2d& m, int c0, int c1,
                                            std::uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
      "[%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(&m.map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

// 2-D TMA store: the box at shared `src` (laid out and swizzled as tma_load_2d leaves it; written by ordinary
// stores: fence_proxy_async + a barrier first) to element (c0, c1) of the map's matrix; elements outside the
// matrix are not written. Completion by bulk groups: bulk_commit, then bulk_wait_read<N> (the shared source may
// be reused) or bulk_wait<N> (the writes are done), N the groups that may stay pending; issuing thread only.
__device__ __forceinline__ void tma_store_2d(const TmaMap2d& m, int c0, int c1, std::uint32_t src) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
                   reinterpret_cast<std::uint64_t>(&m.map)),
               "r"(c0), "r"(c1), "r"(src)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
template <int N>
__device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}

#endif  // !GLR_SM90_HOST_EMU

// The register fence on each row of a 2-D register array (the state slice's hs[MT][32], register-A pa[4][4]).
template <class T, int M, int R>
__device__ __forceinline__ void wgmma_fence_operand(T (&x)[M][R]) {
#pragma unroll
  for (int m = 0; m < M; ++m) wgmma_fence_operand(x[m]);
}

// One wgmma group on the accumulators d, waited for whole: the bracket the comment on wgmma_fence_operand describes
// (d's register fence, wgmma.fence, body's wgmmas, commit, wait for every group, d's register fence again).
template <class D, class Body>
__device__ __forceinline__ void wgmma_group_sync(D& d, Body&& body) {
  wgmma_fence_operand(d);
  wgmma_fence();
  body();
  wgmma_commit();
  wgmma_wait<0>();
  wgmma_fence_operand(d);
}

// x, through a value the compiler cannot see into: what is formed from opaque(x) is formed where it is written,
// not hoisted out of a loop as an invariant (a loop's load addresses, each held in a register through the whole
// loop, spilled in dh_wgmma_kernel). No instruction; the host emulator's is the identity.
#if !defined(GLR_SM90_HOST_EMU)
__device__ __forceinline__ int opaque(int x) {
  asm volatile("" : "+r"(x));
  return x;
}
__device__ __forceinline__ std::int64_t opaque(std::int64_t x) {
  asm volatile("" : "+l"(x));
  return x;
}
#else
template <class T>
inline T opaque(T x) {
  return x;
}
#endif

__device__ __forceinline__ void mbarrier_wait_parity(std::uint32_t bar, std::uint32_t parity) {
  while (!mbarrier_try_wait_parity(bar, parity)) {
  }
}

// Where accumulator register i of `thread` sits in the warpgroup's 64 x N tile (the layout in the header):
// row 16 r + g (+ 8 for i % 4 >= 2), column 8 (i / 4) + 2 t + i % 2. A kernel's epilogue stores through it.
struct AccCoord {
  int row, col;
};
__host__ __device__ constexpr AccCoord wgmma_acc_coord(int thread, int i) {
  const int r = (thread % 128) / 32, g = (thread % 32) / 4, t = thread % 4, h = i % 4;
  return {16 * r + g + (h >= 2 ? 8 : 0), 8 * (i / 4) + 2 * t + (h & 1)};
}

// The descriptor of a matrix at shared address `addr` (16-byte aligned; a swizzled tile's pattern boundary as
// above), byte offsets lbo, sbo (multiples of 16, < 2^18).
__host__ __device__ constexpr std::uint64_t make_desc(std::uint32_t addr, std::uint32_t lbo, std::uint32_t sbo,
                                                      Swizzle s) {
  return static_cast<std::uint64_t>((addr & 0x3FFFFu) >> 4) |
         static_cast<std::uint64_t>((lbo & 0x3FFFFu) >> 4) << 16 |
         static_cast<std::uint64_t>((sbo & 0x3FFFFu) >> 4) << 32 | static_cast<std::uint64_t>(s) << 62;
}

// make_desc(addr + off, ...) from d = make_desc(addr, ...), off a multiple of 16: the start field (bits 0-13) is
// (address & 0x3FFFF) >> 4 and every shared address is below 2^18 (228 KB), so it never carries and one 32-bit add
// to the low word does it, where make_desc's mask, shift and or ran again for every k-step's descriptor.
__host__ __device__ constexpr std::uint64_t desc_advance(std::uint64_t d, std::uint32_t off) {
  return (d & ~0xFFFFFFFFull) | static_cast<std::uint32_t>(static_cast<std::uint32_t>(d) + (off >> 4));
}

// The swizzle of a shared address (the identity for None).
__host__ __device__ constexpr std::uint32_t swizzle_addr(std::uint32_t addr, Swizzle s) {
  const std::uint32_t mask = swizzle_bytes(s) / 16 - 1;  // 0, 1, 3, 7
  return addr ^ (((addr >> 7) & mask) << 4);
}

// A bf16 operand tile (R rows of M or N, Kt columns of K) in one of the canonical layouts, as a kernel lays it
// out; `outer` picks which of the two strides is the outer one (both are valid layouts):
//   K-major none:    core matrices (8 rows x 8 k, 128 B); outer = 0: k-blocks inner (LBO = 128, SBO = Kt/8*128),
//                    outer = 1: row groups inner (SBO = 128, LBO = R/8*128).
//   K-major W-byte:  atoms of 8 rows x W bytes (W/2 k); row groups at SBO = 8W, successive W/2-wide k slabs at
//                    kslab = R/8*8W (outer is ignored: a slab holds W/2 k of every row).
//   MN-major none:   core matrices (8 k x 8 rows, 128 B); outer = 0: row blocks inner (SBO = 128, LBO = R/8*128),
//                    outer = 1: k-blocks inner (LBO = 128, SBO = Kt/8*128).
//   MN-major W-byte: atoms of 8 k x W bytes (W/2 rows); outer = 0: k-groups inner (SBO = 8W, LBO = Kt/8*8W),
//                    outer = 1: row atoms inner (LBO = 8W, SBO = R/(W/2)*8W).
// offset(r, k) is the byte offset before the swizzle; the element lives at swizzle_addr(base + offset, sw) with
// `base` aligned to 1024 bytes. desc(base, s) is the descriptor of k-step s (k = 16s .. 16s + 15).
struct CanonTile {
  Swizzle sw;
  bool mn_major;
  int rows, kt;  // R (a multiple of 8, of W/2 when MN-major swizzled), Kt (a multiple of 16, of W/2 when
                 // K-major swizzled)
  int outer;
  std::uint32_t lbo = 0, sbo = 0, kslab = 0;

  __host__ __device__ constexpr CanonTile(Swizzle s, bool mn, int r, int k, int o)
      : sw(s), mn_major(mn), rows(r), kt(k), outer(o) {
    const std::uint32_t W = swizzle_bytes(s);
    if (!mn && s == Swizzle::None) {
      lbo = o == 0 ? 128u : static_cast<std::uint32_t>(r / 8) * 128u;
      sbo = o == 0 ? static_cast<std::uint32_t>(k / 8) * 128u : 128u;
    } else if (!mn) {
      lbo = 16;  // unused by the hardware
      sbo = 8 * W;
      kslab = static_cast<std::uint32_t>(r / 8) * 8 * W;
    } else if (s == Swizzle::None) {
      sbo = o == 0 ? 128u : static_cast<std::uint32_t>(k / 8) * 128u;
      lbo = o == 0 ? static_cast<std::uint32_t>(r / 8) * 128u : 128u;
    } else {
      sbo = o == 0 ? 8 * W : static_cast<std::uint32_t>(r / static_cast<int>(W / 2)) * 8 * W;
      lbo = o == 0 ? static_cast<std::uint32_t>(k / 8) * 8 * W : 8 * W;
    }
  }
  __host__ __device__ constexpr std::uint32_t bytes() const { return static_cast<std::uint32_t>(rows * kt * 2); }
  __host__ __device__ constexpr std::uint32_t offset(int r, int k) const {
    const std::uint32_t W = swizzle_bytes(sw);
    const auto u = [](int x) { return static_cast<std::uint32_t>(x); };
    if (!mn_major && sw == Swizzle::None) return u(r % 8) * 16 + u(r / 8) * sbo + u(k / 8) * lbo + u(k % 8) * 2;
    if (!mn_major) {
      const int kw = static_cast<int>(W / 2);  // k per slab
      return u(k / kw) * kslab + u(r % 8) * W + u(r / 8) * sbo + u(k % kw) * 2;
    }
    if (sw == Swizzle::None) return u(r % 8) * 2 + u(r / 8) * sbo + u(k % 8) * 16 + u(k / 8) * lbo;
    const int rw = static_cast<int>(W / 2);  // rows per atom
    return u(r % rw) * 2 + u(r / rw) * lbo + u(k % 8) * W + u(k / 8) * sbo;
  }
  __host__ __device__ constexpr std::uint32_t addr(std::uint32_t base, int r, int k) const {
    return swizzle_addr(base + offset(r, k), sw);
  }
  // Start of k-step s: the unswizzled offset of element (0, 16 s).
  __host__ __device__ constexpr std::uint64_t desc(std::uint32_t base, int s) const {
    return make_desc(base + offset(0, 16 * s), lbo, sbo, sw);
  }
};


// ---- The 128B-swizzled K-major tile every glr kernel on wgmma uses (chunk_wgmma_kernel, dh_wgmma_kernel,
// state_t_wgmma_kernel): kRows rows (tokens or the state's K index) x 64 or 128 features, in slabs of 64 features
// (kRows x 128 bytes each), from a 1024-byte aligned base.
// Byte offset of element (r, f): slab f / 64, row r, 16-byte chunk (f % 64) / 8 XOR r % 8.
template <int kRows>
__host__ __device__ constexpr std::uint32_t sw128_offset(int r, int f) {
  return static_cast<std::uint32_t>((f / 64) * kRows * 128 + r * 128 + ((((f % 64) / 8) ^ (r % 8)) * 16) + (f % 8) * 2);
}
// The closed form is CanonTile's K-major 128B layout, and the same bytes as its MN-major reading (the features as
// M / N, the rows as K; e.g. the backward's E K, E^T K, dA K, dA^T Q and the forward's K^T V_new).
template <int kRows, int kD>
constexpr bool sw128_matches_canon() {
  const CanonTile km(Swizzle::B128, false, kRows, kD, 0), mn(Swizzle::B128, true, kD, kRows, 0);
  for (int r = 0; r < kRows; ++r)
    for (int f = 0; f < kD; f += 1)
      if (km.addr(0, r, f) != sw128_offset<kRows>(r, f) || mn.addr(0, f, r) != sw128_offset<kRows>(r, f)) return false;
  return true;
}
static_assert(sw128_matches_canon<64, 128>() && sw128_matches_canon<64, 64>() && sw128_matches_canon<128, 128>(),
              "sw128_offset is CanonTile's 128B layout, K-major and MN-major");
static_assert(sw128_offset<64>(9, 70) == 64 * 128 + 9 * 128 + ((0 ^ 1) * 16) + 6 * 2, "slab 1, row 9, chunk 0 ^ 1");

// Descriptors of a sw128_offset tile at shared address `base` (1024-byte aligned). K-major operand rows r0.. (a multiple of 8),
// k-step s (features 16 s .. 16 s + 15): the start moves by 32 bytes a k-step inside a slab (the swizzle acts on
// the address bits), slabs kRows * 128 bytes apart; SBO 1024 (8-row groups); LBO unused.
template <int kRows>
__device__ __forceinline__ std::uint64_t desc_kmajor(std::uint32_t base, int r0, int s) {
  return make_desc(base + sw128_offset<kRows>(r0, 16 * s), 16, 1024, Swizzle::B128);
}
// MN-major operand: M or N = the features f0 .. f0 + 63 (one 128-byte atom), K = the rows 16 s .. 16 s + 15;
// SBO 1024 (8-row groups), LBO the slab (unused at 64 wide).
template <int kRows>
__device__ __forceinline__ std::uint64_t desc_mnmajor(std::uint32_t base, int f0, int s) {
  return make_desc(base + sw128_offset<kRows>(16 * s, f0), kRows * 128, 1024, Swizzle::B128);
}

// (kRows x kD) bf16 rows, `stride` elements apart, to a sw128_offset tile by cp.async (mma_sync.cuh), kThreads
// threads (one warpgroup) sharing the copy; rows >= valid zero-filled (src not read). The caller commits and waits.
// Thread tid copies piece tid % kPieces of rows tid / kPieces + it kStep: a multiple of 8 rows apart, its pieces
// share one column and one swizzle phase (row % 8), so piece it lies it kStep rows (it kStep 128 bytes) past piece
// 0 in shared memory and it kStep rows past it in global memory: one offset each computed a call, then an immediate
// and a 64-bit add a piece (the per-piece division and swizzle were 30-60 instructions a piece in
// state_t_wgmma_kernel's chunk loop, whose tid is opaque: bench/glr/sm90_bwd_notes.md, "Instruction mix per chunk").
// A zero-filled piece passes its own row's address, not a select of src: a cp.async of src-size 0 reads nothing
// (ptxas makes it LDGSTS's ignore-src predicate, under which the source is not accessed), so the row past the
// tensor's end is never read; the address is 16-byte aligned as every row's is (the emulator checks the alignment
// of every source, read or not). `valid >= kRows ||` folds the row test away where valid is the constant kRows
// (the full tiles: the row index r0 + it kStep < kRows is not known to the compiler, whose tid is opaque).
// kSlab: the rows of the tile dst lies in (its slabs kSlab * 128 bytes apart), where dst is a row band of a larger
// one (rows a multiple of 8 from its base: the same swizzle phase).
template <int kRows, int kD, int kThreads = 128, int kSlab = kRows>
__device__ __forceinline__ void load_sw128(__nv_bfloat16* dst, const __nv_bfloat16* src, std::int64_t stride, int valid,
                                           int tid) {
  static_assert(kD == 64 || kD == 128, "rows of 8 or 16 pieces");
  constexpr int kPieces = kD / 8, kStep = kThreads / kPieces;
  static_assert(kThreads % kPieces == 0 && kStep % 8 == 0 && kRows % kStep == 0,
                "every thread the same number of pieces, in one column and swizzle phase");
  const unsigned t = static_cast<unsigned>(tid);  // (unsigned: a shift and a mask where the compiler cannot see tid)
  const int r0 = static_cast<int>(t / kPieces), cc = static_cast<int>(t % kPieces);
  static_assert(kSlab >= kRows, "a band of a tile of kSlab rows");
  const std::uint32_t d0 = smem_addr(dst) + sw128_offset<kSlab>(r0, cc * 8);
  const __nv_bfloat16* s0 = src + r0 * stride + cc * 8;
  const std::int64_t step = kStep * stride;  // elements between a thread's pieces
#pragma unroll
  for (int it = 0; it < kRows / kStep; ++it)
    cp_async_16(d0 + it * kStep * 128, s0 + it * step, valid >= kRows || r0 + it * kStep < valid);
}

// ---- Narrow N (16, 32: the state slices of gdn_bwd_dh_wgmma.cuh's dh kernel, whose B is a 16- or 32-column slice)
// and wgmma_ss_n / wgmma_rs_n, which take any N of 16, 32, 64, 128 (N = 64, 128: wgmma_ss / wgmma_rs above).
#if !defined(GLR_SM90_HOST_EMU)
template <int TA, int TB>
__device__ __forceinline__ void wgmma_ss_16(float (&d)[8], std::uint64_t da, std::uint64_t db, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, %11, %12;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
               : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));
}
template <int TB>
__device__ __forceinline__ void wgmma_rs_16(float (&d)[8], const std::uint32_t (&a)[4], std::uint64_t db, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, p, 1, 1, %14;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d), "n"(TB));
}
template <int TA, int TB>
__device__ __forceinline__ void wgmma_ss_32(float (&d)[16], std::uint64_t da, std::uint64_t db, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, %19, %20;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
               : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));
}
template <int TB>
__device__ __forceinline__ void wgmma_rs_32(float (&d)[16], const std::uint32_t (&a)[4], std::uint64_t db, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19}, %20, p, 1, 1, %22;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d), "n"(TB));
}
#endif  // !GLR_SM90_HOST_EMU

template <int N, int TA, int TB>
__device__ __forceinline__ void wgmma_ss_n(float (&d)[N / 2], std::uint64_t da, std::uint64_t db, int scale_d) {
  static_assert(N == 16 || N == 32 || N == 64 || N == 128, "wgmma_ss_n: N = 16, 32, 64 or 128");
#if defined(GLR_SM90_HOST_EMU)
  wgmma_ss<N, TA, TB>(d, da, db, scale_d);  // the emulator's twin takes any N
#else
  if constexpr (N == 16)
    wgmma_ss_16<TA, TB>(d, da, db, scale_d);
  else if constexpr (N == 32)
    wgmma_ss_32<TA, TB>(d, da, db, scale_d);
  else
    wgmma_ss<N, TA, TB>(d, da, db, scale_d);
#endif
}
template <int N, int TB>
__device__ __forceinline__ void wgmma_rs_n(float (&d)[N / 2], const std::uint32_t (&a)[4], std::uint64_t db,
                                           int scale_d) {
  static_assert(N == 16 || N == 32 || N == 64 || N == 128, "wgmma_rs_n: N = 16, 32, 64 or 128");
#if defined(GLR_SM90_HOST_EMU)
  wgmma_rs<N, TB>(d, a, db, scale_d);
#else
  if constexpr (N == 16)
    wgmma_rs_16<TB>(d, a, db, scale_d);
  else if constexpr (N == 32)
    wgmma_rs_32<TB>(d, a, db, scale_d);
  else
    wgmma_rs<N, TB>(d, a, db, scale_d);
#endif
}

}  // namespace glr::cuda::sm90
