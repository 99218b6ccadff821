// tests/glr_sm90/emu.hpp: run the sm90 tensor-core kernels on the host, each CUDA thread a fiber (its own stack,
// switched in user space) on the host thread that launches (blocks one after another), with ldmatrix / mma.sync /
// shfl / barriers emulated from their PTX definitions. No GPU needed: it checks the kernels' lane and tile arithmetic (fragment layouts, masks, chunk
// indexing) and their algebra, not timing. cp.async is asynchronous here as the PTX ISA allows it to be (below: each
// copy reads its source at issue, its destination holds 0xff bytes, a NaN, from issue until the issuing thread's
// cp.async.wait_group retires its group), so a read before the wait, or a refill of a buffer still being read,
// gives other words.
//
// Include this first, then glr/cuda/sm90/gdn_fwd_mma.cuh (built with -DGLR_SM90_HOST_EMU). Used by the checks here and
// by glr/cuda/sm90/emu (the kernels behind glr's host code for kgate: glr_sm90_emu_kgate_{fwd,bwd}); it redefines
// __device__, threadIdx and friends, so no other header of a caller's translation unit should see it.
//
// The threads of a block (emu::launch, at the end) are fibers run by a scheduler on the host thread that launches:
// a fiber runs until it must wait (a block or warp barrier, a shuffle or warp-level mma's staging, emu_wgmma.hpp's
// named barriers, wgmma collectives, a failed mbarrier try_wait, the quiescence wait), then the scheduler resumes the
// next unfinished fiber, round-robin in threadIdx order (GLR_EMU_THREAD_ORDER, launch, varies it). A waiting fiber
// re-checks its condition when resumed. A whole round in which no fiber got past a wait, started or ended, twice in a
// row, is a deadlock: it is reported (every thread and what it waits on) and aborts, instead of hanging. One host
// thread per CUDA thread (until 2026-12-06) spent most of its time in the OS scheduler (sched_yield from the spinning
// waits of hundreds of threads on a few cores: GLR_DH_WGMMA=0 glr_sm90_emu_bwd_check split took 482 s wall, 136 s user,
// 392 s system on 2 shared cores; as fibers 14-20 s wall and user, 0.3 s system, the same output); a fiber switch is
// a few instructions and no system call (x86-64: glr_emu_fiber_switch below; elsewhere, or with -DGLR_EMU_FIBER_UCONTEXT,
// swapcontext: correct, but a system call a switch).
//
// Fiber stacks: GLR_EMU_FIBER_STACK_KB (default 1024) KiB each, mmap'd (only the pages touched take memory) with an
// inaccessible 256 KiB guard below, so an overflow faults (SIGSEGV in a kernel: try a larger value) instead of
// corrupting the next fiber's stack (the guard is wide because this compiler does not probe large frames page by
// page); kept for the host thread's lifetime and reused by every block and launch. The deepest the emulator tests go
// is 10 KiB (glr_sm90_wgmma_emu_test; the forward's and backward's subsets 6-8 KiB, the backward's at -O0 too;
// 2026-12-06, GLR_EMU_FIBER_STACK_REPORT=1, which prints the deepest use at the host thread's exit from the pages
// ever touched).
// Per-thread state: emu::tid, emu::block, threadIdx, blockIdx, gridDim, blockDim are host thread_locals that the
// scheduler sets from the fiber's record before every switch to it (so the kernels' names keep working unchanged;
// never keep a reference to them across a wait); emu_wgmma.hpp's per-thread state hangs off the fiber
// (emu::current_fiber()->local) and ends with the CUDA thread.
#pragma once

#include <cuda_bf16.h>
#include <vector_types.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#if !defined(__x86_64__) && !defined(GLR_EMU_FIBER_UCONTEXT)
#define GLR_EMU_FIBER_UCONTEXT 1
#endif
#if defined(GLR_EMU_FIBER_UCONTEXT)
#include <ucontext.h>
#endif

#undef __device__
#undef __global__
#undef __forceinline__
#undef __launch_bounds__
#undef __grid_constant__
#undef __shared__
#undef __align__
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__
#define __shared__
#define __align__(n) __attribute__((aligned(n)))

using std::max;
using std::min;

#if !defined(GLR_EMU_FIBER_UCONTEXT)
// glr_emu_fiber_switch(save, next): save the callee-saved registers and the stack pointer (into *save) of the running
// context, then continue the context whose stack pointer is `next` (saved by an earlier switch, or a new fiber's first
// frame: FiberPool::make). No system call. The SSE and x87 control words (rounding, flush to zero) are not switched:
// the fibers share the host thread's, which nothing in the kernels or the emulator changes (saving and restoring them
// was 85% of a switch's samples, a third of the emulator's time in glr_emu_fiber_switch, under perf). A weak hidden
// symbol in a COMDAT section, so every translation unit that includes this header may define it.
extern "C" __attribute__((visibility("hidden"))) void glr_emu_fiber_switch(void** save, void* next);
asm(R"(
  .pushsection .text.glr_emu_fiber_switch,"axG",@progbits,glr_emu_fiber_switch,comdat
  .weak glr_emu_fiber_switch
  .hidden glr_emu_fiber_switch
  .type glr_emu_fiber_switch, @function
  .p2align 4
glr_emu_fiber_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size glr_emu_fiber_switch, .-glr_emu_fiber_switch
  .popsection
)");
#endif

namespace emu {

// ---- Fibers ----
// What a waiting fiber waits on, for the deadlock report: describe(obj, arg) writes one line. `releasable`: the
// quiescence wait (emu_wgmma.hpp), which a stall releases instead of aborting (Block::stalls).
struct WaitDesc {
  void (*describe)(const void* obj, long long arg, char* buf, std::size_t n) = nullptr;
  const void* obj = nullptr;
  long long arg = 0;
  bool releasable = false;
};
struct FiberLocal {  // per-CUDA-thread state of emu_wgmma.hpp, destroyed when the thread's kernel returns
  virtual ~FiberLocal() = default;
};
struct BlockLocal {  // per-block state of emu_wgmma.hpp (its wgmma groups, named barriers), ended with the block
  virtual ~BlockLocal() = default;
};
struct Block;
// A thread's cp.async copies not yet retired (cp_async_16 .. cp_async_wait, below): the 16 bytes read at issue, where
// they land, and the commit group they belong to (`committed` is the open group's id).
struct PendingCopy {
  std::uint32_t dst;
  unsigned char bytes[16];
  long group;
};
struct CpAsyncState {
  std::vector<PendingCopy> pending;
  long committed = 0;
};
struct Fiber {
  void* sp = nullptr;  // the saved stack pointer while switched out
#if defined(GLR_EMU_FIBER_UCONTEXT)
  ucontext_t uc;
#endif
  char* map = nullptr;  // the mapping: guard, then the stack
  std::size_t map_bytes = 0;
  char* top = nullptr;  // the stack's first byte past its top
  // The CUDA thread it runs now (set by launch for each block).
  void (*job)(void*) = nullptr;
  void* job_ctx = nullptr;
  int tid = 0;
  Block* block = nullptr;
  dim3 thread_idx, block_idx, grid_dim, block_dim;
  bool done = true, blocked = false;
  WaitDesc wait;
  std::unique_ptr<FiberLocal> local;
  CpAsyncState cp;  // its CUDA thread's cp.async copies in flight
};

// The running fiber (null outside a kernel), the scheduler's saved context, and whether anything happened in the
// current round (a fiber started, ended or got past a wait).
inline thread_local Fiber* cur_fiber = nullptr;
inline thread_local void* sched_sp = nullptr;
#if defined(GLR_EMU_FIBER_UCONTEXT)
inline thread_local ucontext_t sched_uc;
#endif
inline thread_local bool progress = false;
inline Fiber* current_fiber() {
  if (cur_fiber == nullptr) {
    std::fprintf(stderr, "emu: a CUDA thread's operation called outside emu::launch\n");
    std::abort();
  }
  return cur_fiber;
}

// The current fiber waits: back to the scheduler, which resumes it in a later turn (the caller then re-checks).
inline void to_scheduler(Fiber* f) {
#if defined(GLR_EMU_FIBER_UCONTEXT)
  swapcontext(&f->uc, &sched_uc);
#else
  glr_emu_fiber_switch(&f->sp, sched_sp);
#endif
}
inline void block_yield(const WaitDesc& w) {
  Fiber* f = current_fiber();
  f->blocked = true;
  f->wait = w;
  to_scheduler(f);
  f->blocked = false;
}
// Wait until ready() (which must only read: the deadlock check takes a failed check for no change).
template <class Ready>
inline void wait_until(Ready&& ready, const WaitDesc& w) {
  if (ready()) return;
  do block_yield(w);
  while (!ready());
  progress = true;
}

// A barrier of n threads of one block (the block's fibers share a host thread: no atomics).
struct Barrier {
  Barrier(int count, const char* what, int index = 0) : n(count), name(what), idx(index) {}
  int n, arrived = 0;
  unsigned gen = 0;
  const char* name;
  int idx;
  void arrive_and_wait() {
    const unsigned g = gen;
    if (++arrived == n) {
      arrived = 0;
      ++gen;
      progress = true;
      return;
    }
    wait_until([&] { return gen != g; }, WaitDesc{&describe, this, 0, false});
  }
  static void describe(const void* o, long long, char* buf, std::size_t len) {
    const auto* b = static_cast<const Barrier*>(o);
    std::snprintf(buf, len, b->name, b->idx);
    const std::size_t k = std::strlen(buf);
    std::snprintf(buf + k, len - k, " (%d of %d arrived)", b->arrived, b->n);
  }
};

struct Warp {
  explicit Warp(int index = 0) : bar(32, "warp %d's barrier (__syncwarp, a shuffle, ldmatrix or mma.sync)", index) {}
  Barrier bar;
  std::uint32_t addr[32];
  std::uint32_t a[32][4];
  std::uint32_t b[32][2];
  float c[32][4];
  float f[32];
  float A[16][16], B[16][8], C[16][8];  // mma.sync's tile, rebuilt once from the 32 lanes' fragments
};
// One block of `threads` threads (a multiple of 32, at most kMaxThreads): the __syncthreads barrier of that count,
// one Warp a 32 threads, and each thread's state for emu_wgmma.hpp's quiescence wait (0 running, 1 ended; other
// values set there); `stalls` counts the rounds in which only quiescence waits were left (emu_wgmma.hpp quiesce);
// `serial` tells the blocks of a process apart (emu_wgmma.hpp's pending TMA loads).
constexpr int kMaxThreads = 1024;
struct Block {
  explicit Block(int threads)
      : n(threads),
        bar(threads, "__syncthreads"),
        state(new std::atomic<std::uint64_t>[static_cast<std::size_t>(threads)]) {
    warps.reserve(static_cast<std::size_t>(threads / 32));
    for (int w = 0; w < threads / 32; ++w) warps.push_back(std::make_unique<Warp>(w));
    for (int t = 0; t < threads; ++t) state[t].store(0);
  }
  int n;
  Barrier bar;
  std::vector<std::unique_ptr<Warp>> warps;
  std::unique_ptr<std::atomic<std::uint64_t>[]> state;
  std::atomic<unsigned> epoch{0};
  unsigned stalls = 0;
  std::uint64_t serial = next_serial().fetch_add(1);
  std::unique_ptr<BlockLocal> local;
  static std::atomic<std::uint64_t>& next_serial() {
    static std::atomic<std::uint64_t> n{0};
    return n;
  }
};
inline thread_local int tid = 0;
inline thread_local Block* block = nullptr;
inline char* smem = nullptr;  // the block's shared memory (blocks run one after another)
inline std::size_t smem_size = 0;  // its bytes as the launch gave them (launch; 0 outside a kernel)

inline Warp& warp() { return *block->warps[static_cast<std::size_t>(tid / 32)]; }
inline int lane() { return tid % 32; }

inline float bf(std::uint16_t x) {
  std::uint32_t u = static_cast<std::uint32_t>(x) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline void split(std::uint32_t w, float& lo, float& hi) {
  lo = bf(static_cast<std::uint16_t>(w & 0xffffu));
  hi = bf(static_cast<std::uint16_t>(w >> 16));
}

}  // namespace emu

inline thread_local dim3 threadIdx, blockIdx;
inline thread_local dim3 gridDim, blockDim;

inline void __syncthreads() { emu::block->bar.arrive_and_wait(); }
inline void __syncwarp() { emu::warp().bar.arrive_and_wait(); }
inline float __shfl_up_sync(unsigned, float v, int off) {
  emu::Warp& w = emu::warp();
  const int l = emu::lane();
  w.f[l] = v;
  w.bar.arrive_and_wait();
  const float r = l >= off ? w.f[l - off] : v;
  w.bar.arrive_and_wait();
  return r;
}

namespace glr::cuda::sm90 {

inline std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(static_cast<const char*>(p) - emu::smem);
}

}  // namespace glr::cuda::sm90

namespace emu {

// Alignment (2026-12-07, helper hBL; the h pass's prefetch faulted with "misaligned address" on an H100 that the
// emulator had passed). A shared address here is the byte offset from the dynamic shared memory's base (smem_addr),
// so the base is modelled 1024-byte aligned, as the device places it (its guarantee is 16 bytes; the kernels that
// need 128 or 1024 round their base up themselves, and that rounding is what the TMA and descriptor checks see),
// and every alignment fault is the kernel's own carve-up or index arithmetic. launch requires the host array behind
// it 16-byte aligned, so a shared pointer's host alignment mod 16 is its device alignment too (the plain C++ vector
// loads and stores: -fsanitize=alignment on the emulator targets, tests/glr_sm90/CMakeLists.txt). What each modelled
// instruction requires, as the PTX ISA states it: cp.async.cg 16 bytes, both addresses 16-aligned (.ca 4, 8, 16:
// aligned to the size); ldmatrix every row address 16-aligned; cp.async.bulk 16; TMA's shared box the swizzle
// pattern (emu_wgmma.hpp); an mbarrier 8; a wgmma descriptor with base offset 0 and a swizzled layout starts in
// the first row of its pattern (emu_wgmma.hpp desc_addr). A violation aborts naming the operation, the thread, the
// address space, the buffer and offset, and the alignment required.

using BufferList = std::vector<std::pair<const void*, const void*>>;  // [begin, end) of each registered buffer
// The index of the first buffer of `bufs` that holds all of [p, p + bytes), or -1.
inline long find_buffer(const BufferList& bufs, const void* p, std::size_t bytes) {
  const char* q = static_cast<const char*>(p);
  for (std::size_t i = 0; i < bufs.size(); ++i)
    if (q >= static_cast<const char*>(bufs[i].first) && q + bytes <= static_cast<const char*>(bufs[i].second))
      return static_cast<long>(i);
  return -1;
}
// The registered global buffer (CpAsyncBoundsScope) that holds p, as "buffer i of n (base .., bytes ..) + offset", or
// that none does.
inline std::string global_where(const void* p, const BufferList& bufs) {
  const long i = find_buffer(bufs, p, 1);
  if (i >= 0) {
    const char* b = static_cast<const char*>(bufs[static_cast<std::size_t>(i)].first);
    const char* e = static_cast<const char*>(bufs[static_cast<std::size_t>(i)].second);
    char buf[200];
    std::snprintf(buf, sizeof buf, "registered buffer %ld of %zu (base %p, %td bytes) + byte offset %td", i,
                  bufs.size(), static_cast<const void*>(b), e - b, static_cast<const char*>(p) - b);
    return buf;
  }
  return bufs.empty() ? std::string("no buffers registered (CpAsyncBoundsScope)")
                      : std::string("outside every registered buffer");
}
[[noreturn]] inline void misaligned(const char* op, const char* space, const std::string& where, unsigned long long addr,
                                    unsigned align, unsigned bytes) {
  const Fiber* f = cur_fiber;
  std::fprintf(stderr,
               "emu: misaligned %s: thread %d of block (%u, %u): %s address 0x%llx (%s) is %llu bytes past a "
               "multiple of %u; %u-byte access, requires %u-byte alignment\n",
               op, f ? f->tid : -1, f ? f->block_idx.x : 0u, f ? f->block_idx.y : 0u, space, addr, where.c_str(),
               addr % align, align, bytes, align);
  std::abort();
}
// A shared-memory access of `bytes` at `addr` (smem_addr's offset) that must be `align`-aligned and (where the
// launch gave a size) inside the block's shared memory.
inline void check_shared(const char* op, std::uint32_t addr, unsigned align, unsigned bytes) {
  char where[160];
  if (addr % align != 0) {
    std::snprintf(where, sizeof where, "dynamic shared memory + byte offset %u of %zu", addr, smem_size);
    misaligned(op, "shared", where, addr, align, bytes);
  }
  if (smem_size != 0 && static_cast<std::size_t>(addr) + bytes > smem_size) {
    const Fiber* f = cur_fiber;
    std::fprintf(stderr, "emu: %s of thread %d: shared bytes [%u, %u) past the %zu the launch gave\n", op,
                 f ? f->tid : -1, addr, addr + bytes, smem_size);
    std::abort();
  }
}

}  // namespace emu

namespace glr::cuda::sm90 {

// ex2.approx.ftz.f32: 2^x with the hardware's flush of results below 2^-126 to 0 (its 2-ulp approximation is not
// reproduced: exp2f, within it); NaN stays NaN, -Inf gives 0.
inline float ex2_approx(float x) {
  const float y = std::exp2(x);
  return y < 0x1p-126f ? 0.f : y;
}

// ldmatrix .x4: lanes 8i..8i+7 give the row addresses of matrix i. Without .trans lane l receives row l/4,
// columns 2(l%4), 2(l%4)+1 of each matrix; with .trans, rows 2(l%4), 2(l%4)+1 of column l/4.
inline void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t addr) {
  emu::Warp& w = emu::warp();
  const int l = emu::lane();
  emu::check_shared("ldmatrix row address", addr, 16, 16);
  w.addr[l] = addr;
  w.bar.arrive_and_wait();
  for (int i = 0; i < 4; ++i) std::memcpy(&r[i], emu::smem + w.addr[8 * i + l / 4] + 4 * (l % 4), 4);
  w.bar.arrive_and_wait();
}
inline void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t addr) {
  emu::Warp& w = emu::warp();
  const int l = emu::lane();
  emu::check_shared("ldmatrix.trans row address", addr, 16, 16);
  w.addr[l] = addr;
  w.bar.arrive_and_wait();
  for (int i = 0; i < 4; ++i) {
    std::uint16_t lo, hi;
    std::memcpy(&lo, emu::smem + w.addr[8 * i + 2 * (l % 4)] + 2 * (l / 4), 2);
    std::memcpy(&hi, emu::smem + w.addr[8 * i + 2 * (l % 4) + 1] + 2 * (l / 4), 2);
    r[i] = lo | (static_cast<std::uint32_t>(hi) << 16);
  }
  w.bar.arrive_and_wait();
}

// mma.m16n8k16.row.col f32.bf16: the whole tile rebuilt from the 32 lanes' fragments by lane 0 (between the two
// barriers: the fragments are all in and nobody reads the tile of the last mma any more), then each lane's four
// outputs from it.
inline void mma_bf16_16816(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  emu::Warp& w = emu::warp();
  const int l = emu::lane();
  for (int i = 0; i < 4; ++i) {
    w.a[l][i] = a[i];
    w.c[l][i] = d[i];
  }
  w.b[l][0] = b0;
  w.b[l][1] = b1;
  w.bar.arrive_and_wait();
  auto& A = w.A;
  auto& B = w.B;
  auto& Cm = w.C;
  if (l == 0)
    for (int x = 0; x < 32; ++x) {
      const int g = x / 4, t = x % 4;
      emu::split(w.a[x][0], A[g][2 * t], A[g][2 * t + 1]);
      emu::split(w.a[x][1], A[g + 8][2 * t], A[g + 8][2 * t + 1]);
      emu::split(w.a[x][2], A[g][2 * t + 8], A[g][2 * t + 9]);
      emu::split(w.a[x][3], A[g + 8][2 * t + 8], A[g + 8][2 * t + 9]);
      emu::split(w.b[x][0], B[2 * t][g], B[2 * t + 1][g]);
      emu::split(w.b[x][1], B[2 * t + 8][g], B[2 * t + 9][g]);
      Cm[g][2 * t] = w.c[x][0];
      Cm[g][2 * t + 1] = w.c[x][1];
      Cm[g + 8][2 * t] = w.c[x][2];
      Cm[g + 8][2 * t + 1] = w.c[x][3];
    }
  w.bar.arrive_and_wait();
  const int g = l / 4, t = l % 4;
  // Default: the exact sum of the 16 products and the accumulator, rounded once to fp32. GLR_EMU_MMA_TRUNC=1: a
  // pessimistic model of the tensor cores' fp32 accumulation (products exact; every addend aligned to the largest
  // one's fp32 ulp with its lower bits truncated, no guard bits; the sum normalised toward zero), to see how much
  // a long positive sum loses on hardware (tests/glr_sm90/emu_check.cpp accumulation).
  static const bool trunc = [] {
    const char* e = std::getenv("GLR_EMU_MMA_TRUNC");
    return e != nullptr && *e == '1';
  }();
  auto dot = [&](int i, int j) {
    if (trunc) {
      double term[17];
      int emax = -100000;
      for (int k = 0; k < 16; ++k) term[k] = static_cast<double>(A[i][k]) * B[k][j];
      term[16] = Cm[i][j];
      for (double x : term)
        if (x != 0 && std::isfinite(x)) emax = std::max(emax, std::ilogb(x));
      double s = 0;
      if (emax == -100000) {
        for (double x : term) s += x;
        return static_cast<float>(s);
      }
      const double q = std::ldexp(1.0, emax - 23);  // the fp32 ulp of the largest addend's binade
      for (double x : term) s += std::isfinite(x) ? std::trunc(x / q) * q : x;
      float f = static_cast<float>(s);
      if (std::isfinite(f) && std::fabs(static_cast<double>(f)) > std::fabs(s)) f = std::nextafter(f, 0.0f);
      return f;
    }
    double s = 0;
    for (int k = 0; k < 16; ++k) s += static_cast<double>(A[i][k]) * B[k][j];
    return static_cast<float>(s + Cm[i][j]);
  };
  d[0] = dot(g, 2 * t);
  d[1] = dot(g, 2 * t + 1);
  d[2] = dot(g + 8, 2 * t);
  d[3] = dot(g + 8, 2 * t + 1);
}

// cp.async (16 bytes, .cg) as asynchronous as the PTX ISA lets it be, to the thread that issued it and to the rest of
// the block: the source is read at issue (its bounds are the caller's at that moment, as on the GPU, which may read
// it at once); the destination's 16 bytes become 0xff (a bf16 / fp32 NaN: "not yet landed", any value the GPU could
// show there) at issue and get the copy only when the issuing thread's cp_async_wait<N> retires its commit group
// (every group but the N newest committed; copies issued after the last commit are in no group and stay in flight,
// as cp.async.wait_group leaves them). So a thread that reads a tile before its own wait, or before a barrier that
// follows every issuing thread's wait, reads NaN instead of the data; a copy issued into a buffer whose last reader
// (a thread, or a wgmma not yet retired: emu_wgmma.hpp) has not read it yet feeds that reader NaN; either gives other
// words than the kernel's correct schedule, which no wait placement can (the data is in place by the wait). Copies
// that a thread never waits for are dropped when it ends and counted (cp_async_unretired).
// The global buffers a kernel may read by cp.async: [begin, end) byte ranges a test sets around its launches (empty:
// unchecked). A copy whose 16 source bytes lie in none of them aborts, naming the thread and the address: a tile load
// past a tensor's end (a short last chunk, T not a multiple of the chunk) shows here even where the bytes it would read
// never reach an output word. Zero-filled copies (valid false) read nothing and are not checked.
inline emu::BufferList cp_async_bounds;
// Sets cp_async_bounds for one scope (a test's launches) and clears it when the scope ends, also on an early return.
struct CpAsyncBoundsScope {
  CpAsyncBoundsScope() { cp_async_bounds.clear(); }
  ~CpAsyncBoundsScope() { cp_async_bounds.clear(); }
  CpAsyncBoundsScope(const CpAsyncBoundsScope&) = delete;
  CpAsyncBoundsScope& operator=(const CpAsyncBoundsScope&) = delete;
  template <class... Vecs>
  void add(const Vecs&... xs) {
    (add_one(xs), ...);
  }

 private:
  template <class Vec>
  static void add_one(const Vec& x) {
    if (!x.empty()) cp_async_bounds.emplace_back(x.data(), x.data() + x.size());
  }
};
inline std::atomic<long>& cp_async_unretired() {
  static std::atomic<long> n{0};
  return n;
}
// cp.async.cg ... 16: the shared destination and the global source both 16-byte aligned (the source also when the
// copy zero-fills, valid false: the address operand is checked all the same; the kernels pass an aligned base there).
inline void cp_async_check_align(std::uint32_t dst, const void* src, unsigned bytes) {
  emu::check_shared("cp.async destination", dst, bytes, bytes);
  const auto a = static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(src));
  if (a % bytes != 0) emu::misaligned("cp.async source", "global", emu::global_where(src, cp_async_bounds), a, bytes, bytes);
}
inline void cp_async_16(std::uint32_t dst, const void* src, bool valid) {
  emu::CpAsyncState& st = emu::current_fiber()->cp;
  emu::PendingCopy c{dst, {}, st.committed};
  cp_async_check_align(dst, src, 16);
  if (valid && !cp_async_bounds.empty()) {
    if (emu::find_buffer(cp_async_bounds, src, 16) < 0) {
      std::fprintf(stderr, "emu: cp.async of thread %d reads 16 bytes at %p, outside every buffer the test gave (cp_async_bounds)\n",
                   emu::tid, src);
      std::abort();
    }
  }
  if (valid)
    std::memcpy(c.bytes, src, 16);
  else
    std::memset(c.bytes, 0, 16);
  st.pending.push_back(c);
  std::memset(emu::smem + dst, 0xff, 16);
}
inline void cp_async_commit() { ++emu::current_fiber()->cp.committed; }
template <int N>
inline void cp_async_wait() {
  static_assert(N >= 0);
  emu::CpAsyncState& st = emu::current_fiber()->cp;
  const long limit = st.committed - N;  // retire the groups older than the N newest committed ones
  std::size_t i = 0;
  for (; i < st.pending.size() && st.pending[i].group < limit; ++i)
    std::memcpy(emu::smem + st.pending[i].dst, st.pending[i].bytes, 16);
  st.pending.erase(st.pending.begin(), st.pending.begin() + static_cast<std::ptrdiff_t>(i));
}

}  // namespace glr::cuda::sm90

namespace emu {

// GLR_EMU_BLOCK_ORDER's value where it asks for other than row-major order (launch, below), else null (unset,
// empty or 0).
inline const char* block_order() {
  const char* o = std::getenv("GLR_EMU_BLOCK_ORDER");
  return o != nullptr && *o != '\0' && std::strcmp(o, "0") != 0 ? o : nullptr;
}

// GLR_EMU_THREAD_ORDER (read once): the order the scheduler resumes a block's fibers in each round. Unset, empty or
// 0: threadIdx order (deterministic); "r": reversed; a number n > 0: a fresh permutation every round, drawn from n
// (std::mt19937 seeded with n at each launch: the same for the same n and launches). Which thread reaches a barrier
// last, and so runs on first, changes with it; a kernel whose words depend on the schedule (a race: the GPU promises
// no order between threads except through its barriers) gives other words under another order.
inline const char* thread_order() {
  static const char* const o = [] {
    const char* e = std::getenv("GLR_EMU_THREAD_ORDER");
    return e != nullptr && *e != '\0' && std::strcmp(e, "0") != 0 ? e : nullptr;
  }();
  return o;
}

// The seed an order variable's value (block_order, thread_order: neither null nor "0") asks for, or nullopt for "r"
// (reversed); any other value than a number aborts, naming the variable.
inline std::optional<std::uint32_t> order_seed(const char* name, const char* value) {
  if (std::strcmp(value, "r") == 0) return std::nullopt;
  char* end = nullptr;
  const unsigned long seed = std::strtoul(value, &end, 10);
  if (*end != '\0') {
    std::fprintf(stderr, "%s is '%s': use 0, r or a seed number\n", name, value);
    std::abort();
  }
  return static_cast<std::uint32_t>(seed);
}

// The host thread's fibers, made on first use and kept (with their stacks) for its lifetime.
class FiberPool {
 public:
  FiberPool() = default;
  FiberPool(const FiberPool&) = delete;
  FiberPool& operator=(const FiberPool&) = delete;
  ~FiberPool() {
    if (const char* r = std::getenv("GLR_EMU_FIBER_STACK_REPORT"); r != nullptr && *r == '1' && !fibers_.empty())
      std::fprintf(stderr, "emu: %zu fibers of %zu KiB stack; the deepest touched %zu KiB\n", fibers_.size(),
                   stack_bytes() / 1024, deepest_touched() / 1024);
    for (auto& f : fibers_) munmap(f->map, f->map_bytes);
  }
  Fiber& get(int i) {
    while (static_cast<int>(fibers_.size()) <= i) fibers_.push_back(make(static_cast<int>(fibers_.size())));
    return *fibers_[static_cast<std::size_t>(i)];
  }
  static std::size_t stack_bytes() {
    static const std::size_t b = [] {
      const char* e = std::getenv("GLR_EMU_FIBER_STACK_KB");
      const long kb = e != nullptr && *e != '\0' ? std::strtol(e, nullptr, 10) : 1024;
      if (kb < 64) {
        std::fprintf(stderr, "GLR_EMU_FIBER_STACK_KB is '%s': at least 64\n", e);
        std::abort();
      }
      const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
      return (static_cast<std::size_t>(kb) * 1024 + page - 1) / page * page;
    }();
    return b;
  }

 private:
  // The entry of every fiber: run the CUDA thread it is given, end it, wait for the next (launch reuses fibers).
  [[noreturn]] static void main() {
    for (;;) {
      Fiber* f = cur_fiber;
      progress = true;
      f->job(f->job_ctx);
      f->local.reset();
      f->done = true;
      progress = true;
      to_scheduler(f);
    }
  }
  static constexpr std::size_t kGuardBytes = 256 * 1024;
  // Fiber i's stack starts colour(i) bytes below its mapping's end: with every top at the same offset in its
  // page (and the mappings 1.25 MiB apart) the hot top of every stack fell in the same cache sets, and a switch's
  // first loads from the new stack were most of its time (perf); staggered by 64-byte lines over 64 KiB they spread.
  static constexpr std::size_t kColourBytes = 64 * 1024;
  static std::size_t colour(int i) { return static_cast<std::size_t>((i * 37) % 1024) * 64; }
  static std::unique_ptr<Fiber> make(int index) {
    auto f = std::make_unique<Fiber>();
    f->map_bytes = stack_bytes() + kColourBytes + kGuardBytes;
    void* m = mmap(nullptr, f->map_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (m == MAP_FAILED || mprotect(m, kGuardBytes, PROT_NONE) != 0) {
      std::fprintf(stderr, "emu: cannot map a fiber stack of %zu bytes\n", f->map_bytes);
      std::abort();
    }
    f->map = static_cast<char*>(m);
    char* const top = f->top = f->map + f->map_bytes - colour(index);  // 64-byte aligned
#if defined(GLR_EMU_FIBER_UCONTEXT)
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = f->map + kGuardBytes;
    f->uc.uc_stack.ss_size = stack_bytes() + kColourBytes - colour(index);
    f->uc.uc_link = nullptr;
    makecontext(&f->uc, &FiberPool::main, 0);
    (void)top;
#else
    // The first frame glr_emu_fiber_switch pops: r15 .. rbp (0), then main as the return address, entered with the
    // stack aligned as after a call (rsp = 8 mod 16; its own return address 0).
    auto* w = reinterpret_cast<std::uint64_t*>(top - 64);
    std::memset(w, 0, 64);
    w[6] = reinterpret_cast<std::uint64_t>(&FiberPool::main);
    f->sp = w;
#endif
    return f;
  }
  // The deepest any stack was touched: from its top to the lowest resident page's start.
  std::size_t deepest_touched() const {
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    std::size_t deepest = 0;
    std::vector<unsigned char> v((stack_bytes() + kColourBytes) / page);
    for (const auto& f : fibers_) {
      char* const lo = f->map + kGuardBytes;
      if (mincore(lo, stack_bytes() + kColourBytes, v.data()) != 0) continue;
      for (std::size_t i = 0; i < v.size(); ++i)
        if (v[i] & 1) {
          deepest = std::max(deepest, static_cast<std::size_t>(f->top - (lo + i * page)));
          break;
        }
    }
    return deepest;
  }
  std::vector<std::unique_ptr<Fiber>> fibers_;
};
inline FiberPool& fiber_pool() {
  thread_local FiberPool pool;
  return pool;
}

// Switch to fiber f from the scheduler, its CUDA thread's names set first.
inline void resume(Fiber* f) {
  cur_fiber = f;
  tid = f->tid;
  block = f->block;
  ::threadIdx = f->thread_idx;
  ::blockIdx = f->block_idx;
  ::gridDim = f->grid_dim;
  ::blockDim = f->block_dim;
#if defined(GLR_EMU_FIBER_UCONTEXT)
  swapcontext(&sched_uc, &f->uc);
#else
  glr_emu_fiber_switch(&sched_sp, f->sp);
#endif
}

// Every unfinished thread waits and none can proceed: say who waits on what (runs of threads with the same wait in
// one line) and abort.
[[noreturn]] inline void report_deadlock(Fiber* const* fs, int n) {
  const Fiber* f0 = fs[0];
  std::fprintf(stderr,
               "emu: deadlock in block (%u, %u) of grid (%u, %u), %d threads: every unfinished thread waits and none "
               "can proceed:\n",
               f0->block_idx.x, f0->block_idx.y, f0->grid_dim.x, f0->grid_dim.y, n);
  auto line = [&](int t) {
    const Fiber* f = fs[t];
    if (f->done) return std::string("ended");
    if (!f->blocked || f->wait.describe == nullptr) return std::string("waiting");
    char buf[256];
    f->wait.describe(f->wait.obj, f->wait.arg, buf, sizeof buf);
    return std::string(buf);
  };
  for (int t = 0; t < n;) {
    const std::string l = line(t);
    int u = t + 1;
    while (u < n && line(u) == l) ++u;
    if (u - t == 1)
      std::fprintf(stderr, "  thread %d: %s\n", t, l.c_str());
    else
      std::fprintf(stderr, "  threads %d-%d: %s\n", t, u - 1, l.c_str());
    t = u;
  }
  std::abort();
}

// Run the block's n fibers to their end: rounds over the unfinished ones in GLR_EMU_THREAD_ORDER's order. Two rounds
// in a row without progress: if some thread sits in a quiescence wait (releasable), count a stall (Block::stalls,
// which releases it: emu_wgmma.hpp quiesce), else report the deadlock.
inline void run_fibers(Fiber* const* fs, int n, Block& blk, std::mt19937* rng) {
  std::vector<int> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  const char* o = thread_order();
  if (o != nullptr && std::strcmp(o, "r") == 0) std::reverse(order.begin(), order.end());
  int left = n, idle = 0;
  while (left > 0) {
    if (rng != nullptr) std::shuffle(order.begin(), order.end(), *rng);
    progress = false;
    for (const int t : order) {
      Fiber* f = fs[t];
      if (f->done) continue;
      resume(f);
      if (f->done) --left;
    }
    if (left == 0 || progress) {
      idle = 0;
      continue;
    }
    if (++idle < 2) continue;
    idle = 0;
    bool releasable = false;
    for (int t = 0; t < n; ++t) releasable |= !fs[t]->done && fs[t]->blocked && fs[t]->wait.releasable;
    if (!releasable) report_deadlock(fs, n);
    ++blk.stalls;
  }
  cur_fiber = nullptr;
  block = nullptr;
}

// Run kernel(args) over grid (gx, gy) with `threads` threads a block (128 unless given; a multiple of 32 up to
// kMaxThreads, blockDim.x = threads; several warpgroups for producer/consumer kernels); `base` is the kernels'
// `extern __shared__` array (defined by the test), filled with a poison pattern before each block. The blocks run
// one after another on the calling host thread, each thread of a block a fiber (the header); GLR_EMU_THREAD_ORDER
// (thread_order above) sets the order the fibers are resumed in.
template <class Args>
void launch(void (*kernel)(Args), int gx, int gy, char* base, std::size_t smem_bytes, const Args& args,
            int threads = 128) {
  if (threads <= 0 || threads % 32 != 0 || threads > kMaxThreads) {
    std::fprintf(stderr, "emu::launch: %d threads a block (a multiple of 32 up to %d)\n", threads, kMaxThreads);
    std::abort();
  }
  if (cur_fiber != nullptr) {
    std::fprintf(stderr, "emu::launch: called from a kernel\n");
    std::abort();
  }
  if (reinterpret_cast<std::uintptr_t>(base) % 16 != 0) {
    std::fprintf(stderr, "emu::launch: the shared memory array %p is not 16-byte aligned (the device's base is)\n",
                 static_cast<void*>(base));
    std::abort();
  }
  smem = base;
  smem_size = smem_bytes;
  // The order the blocks run in: GLR_EMU_BLOCK_ORDER unset, empty or 0 row-major (bx fastest); "r" reversed; a
  // number n > 0 a permutation drawn from n (std::mt19937, std::shuffle: the same for the same n and grid). A kernel
  // whose blocks communicate (the chunk kernels' group sums: the last block of a group to finish sums it) must give
  // the same words in every order; the GPU promises none.
  std::vector<long long> order(static_cast<std::size_t>(gx) * static_cast<std::size_t>(gy));
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<long long>(i);
  if (const char* o = block_order(); o != nullptr) {
    if (const std::optional<std::uint32_t> seed = order_seed("GLR_EMU_BLOCK_ORDER", o)) {
      std::mt19937 rng(*seed);
      std::shuffle(order.begin(), order.end(), rng);
    } else {
      std::reverse(order.begin(), order.end());
    }
  }
  std::unique_ptr<std::mt19937> thread_rng;
  if (const char* o = thread_order(); o != nullptr)
    if (const std::optional<std::uint32_t> seed = order_seed("GLR_EMU_THREAD_ORDER", o))
      thread_rng = std::make_unique<std::mt19937>(*seed);
  struct Ctx {
    void (*kernel)(Args);
    const Args* args;
  } ctx{kernel, &args};
  const auto job = [](void* c) {
    const Ctx* x = static_cast<const Ctx*>(c);
    x->kernel(*x->args);
    block->state[tid].store(1);
    CpAsyncState& cp = current_fiber()->cp;  // copies never waited for: dropped (nothing read them after a wait)
    if (!cp.pending.empty() &&
        glr::cuda::sm90::cp_async_unretired().fetch_add(static_cast<long>(cp.pending.size())) == 0)
      std::fprintf(stderr, "emu: a thread ended with %zu cp.async copies never retired by cp_async_wait\n",
                   cp.pending.size());
    cp.pending.clear();
    cp.committed = 0;
  };
  FiberPool& pool = fiber_pool();
  std::vector<Fiber*> fs(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) fs[static_cast<std::size_t>(t)] = &pool.get(t);
  for (const long long li : order) {
    const int by = static_cast<int>(li / gx), bx = static_cast<int>(li % gx);
    std::memset(base, 0x7f, smem_bytes);  // bf16 0x7f7f ~ 3.4e38: a read before write shows up
    Block blk(threads);
    for (int t = 0; t < threads; ++t) {
      Fiber* f = fs[static_cast<std::size_t>(t)];
      f->job = job;
      f->job_ctx = &ctx;
      f->tid = t;
      f->block = &blk;
      f->thread_idx = dim3(static_cast<unsigned>(t), 1, 1);
      f->block_idx = dim3(static_cast<unsigned>(bx), static_cast<unsigned>(by), 1);
      f->grid_dim = dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy), 1);
      f->block_dim = dim3(static_cast<unsigned>(threads), 1, 1);
      f->done = false;
      f->blocked = false;
      f->wait = WaitDesc{};
      f->cp.pending.clear();
      f->cp.committed = 0;
    }
    run_fibers(fs.data(), threads, blk, thread_rng.get());
  }
  smem_size = 0;
}

}  // namespace emu
