// tests/glr_sm90/emu_wgmma.hpp: host twins of glr/cuda/sm90/wgmma.cuh (wgmma.mma_async m64nNk16 bf16 -> fp32
// with shared-memory matrix descriptors, its fence / commit / wait, mbarrier, the 1-D bulk copy), on top of
// emu.hpp (each CUDA thread a fiber of the block's host thread). Include this first, then wgmma.cuh (built with
// -DGLR_SM90_HOST_EMU).
//
// What it models, from the PTX ISA ("Asynchronous Warpgroup Level Matrix Multiply-Accumulate": matrix
// descriptor format, canonical layouts, register fragments):
// - wgmma is a warpgroup collective: the 128 threads of a warpgroup (threadIdx.x / 128) meet on a barrier,
//   hand in their descriptors (which must be warpgroup-uniform: a non-uniform descriptor, scale-d, shape or
//   transpose bit aborts), A fragments (register A); one thread decodes A (64 x 16) and B (16 x N) from shared
//   memory through the descriptor, independently of the layout helpers in wgmma.cuh (start, LBO, SBO, swizzle
//   mode, transpose bit -> the byte address of every element, the swizzle on address bits); each thread then
//   computes its own accumulators: the exact sum of the 16 products plus (scale-d ? D : 0), rounded once to
//   fp32 (as emu.hpp's mma.sync; GLR_EMU_MMA_TRUNC=1 selects emu.hpp's truncating model for wgmma too).
// - A descriptor's base-offset field must be 0 (not emulated: aborts); every decoded address must lie below
//   emu::wg::smem_limit (set it to the shared-memory size the kernel was given; aborts otherwise).
// - Asynchrony, the strict way: a wgmma takes effect (reads shared memory and the accumulators, writes them)
//   only when wgmma_wait retires its commit group (PendingMma below), so reading accumulators too early or
//   overwriting an operand before the wait gives a wrong result; fences are no-ops (the generic / async proxy
//   split is not modelled: a missing fence.proxy.async or wgmma.fence is not caught).
// - named barriers (bar.sync / bar.arrive id, count): a generation counter per (block, id), counted per
//   thread (the hardware counts whole warps: keep counts multiples of 32 and every thread of a warp arriving);
//   setmaxnreg: checks R only.
// - TMA 2-D tile loads (cp.async.bulk.tensor.2d): TmaMap2d here is a plain struct (the device one wraps a
//   CUtensorMap); the box is copied with zeros outside the matrix and the swizzle on the shared address bits,
//   then its bytes complete on the mbarrier -- late: when a thread next touches that mbarrier (a try_wait that
//   finds the phase open, or an arrive), so skipping the full-barrier wait or waiting on the wrong parity reads
//   stale shared memory deterministically. TMA stores are deferred to the bulk wait that
//   retires their group (the shared source read then; elements outside the matrix skipped).
// - mbarrier: the 8-byte word in shared memory holds the pending arrivals, the expected count, the transaction
//   count and the phase bit, updated atomically; try_wait.parity(p) is true once the phase of parity p has
//   completed; a failed try_wait yields to the block's scheduler (emu.hpp). bulk_copy_g2s copies at once and then
//   completes its bytes on the barrier.
// Blocks of several warpgroups: emu::launch(kernel, ..., args, threads) (emu.hpp; 128 unless given); the wgmma
// twins key their collective state on (block, threadIdx.x / 128), the named barriers on (block, id).
#pragma once

#include "emu.hpp"

#include <atomic>
#include <cstdlib>
#include <cstdio>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace emu::wg {

inline std::uint32_t smem_limit = 0;  // bytes of emu::smem the kernel may address; 0: unchecked

// The other extreme schedule (set between launches): TMA loads land at issue, and a wgmma_wait retires its wgmmas
// (reads their shared memory) only once the block is quiescent: every other thread has ended, waits in a
// wgmma_wait too or in a wgmma collective's first barrier, or polls an mbarrier phase that has not completed. So a
// producer refills every stage it may (by the barriers) before a consumer's in-flight wgmmas read theirs: a
// consumer that releases a stage before the wgmmas reading it have retired deterministically feeds them the next
// k-tile. (Late landing, the default, is the extreme for the consumer side.) Thread states in emu::Block::state:
// 0 running, 1 ended, 2 in a wgmma_wait or collective barrier, 4 + (bar << 1 | parity) polling an mbarrier.
// Limits: a thread blocked in __syncthreads, a warp collective or a named barrier counts as running, so a kernel
// that retires wgmmas while another thread sits in one never sees the block quiescent: the scheduler (emu.hpp
// run_fibers) then finds no thread able to proceed but the quiescence waiters, which it releases as a timeout
// (counted in quiesce_timeouts; the pipeline test requires 0; before the fibers, a 10 s wall-clock timeout).
// Neither schedule catches a producer that skips its empty-barrier wait: the full barriers then run
// phases ahead of the consumers and their parity waits alias (a hang, not a wrong result, as they may on a GPU; here
// the scheduler reports it as a deadlock).
inline bool tma_early = false;
inline std::atomic<long> quiesce_timeouts{0};
// GLR_EMU_TMA_AT_ISSUE=1 (read once, at start): TMA loads land at issue, as with tma_early, while wgmmas still read
// their shared memory when their wgmma_wait retires them (the default, no quiescence): every refill's write as early
// and every product's read as late as a GPU could make them. A buffer refilled before the last product reading it
// has retired then feeds that product the next tile (a wrong result; the block barrier the refill follows orders
// the two, so it is deterministic). For kernels whose threads sit in block barriers while products are in flight,
// where tma_early's quiescence would time out (chunk_tma_kernel, gdn_bwd_chunk_tma.cuh).
inline const bool tma_at_issue = [] {
  const char* e = std::getenv("GLR_EMU_TMA_AT_ISSUE");
  return e != nullptr && e[0] == '1' && e[1] == '\0';
}();
inline void set_state(std::uint64_t v) {
  if (tma_early) emu::block->state[threadIdx.x].store(v);
}
inline void describe_text(const void* o, long long, char* buf, std::size_t n) {
  std::snprintf(buf, n, "%s", static_cast<const char*>(o));
}

[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "emu_wgmma: %s (thread %u)\n", what, threadIdx.x);
  std::abort();
}

struct Group {
  explicit Group(int wg) : bar(128, "warpgroup %d's wgmma collective", wg) {}
  emu::Barrier bar;
  std::uint64_t da[128], db[128];
  int key[128];  // shape / transpose / scale-d / operand source, packed: must be uniform
  std::uint32_t a[128][4];
  float A[64][16], B[16][256];
};

// Named barrier `id` of a block: a generation counter; the first arrival of a generation fixes the count.
struct NamedBar {
  int id = 0, arrived = 0, expected = 0;
  unsigned gen = 0;
  static void describe(const void* o, long long, char* buf, std::size_t n) {
    const auto* b = static_cast<const NamedBar*>(o);
    std::snprintf(buf, n, "named barrier %d (bar.sync; %d of %d arrived)", b->id, b->arrived, b->expected);
  }
};
// A block's collective state, made at its first use and ended with the block (emu::Block::local): each warpgroup's
// wgmma Group, the named barriers 1..15. (A block's threads are fibers of one host thread: no locks.)
struct BlockState : emu::BlockLocal {
  std::unique_ptr<Group> groups[emu::kMaxThreads / 128];
  NamedBar bars[16];
};
inline BlockState& block_state() {
  std::unique_ptr<emu::BlockLocal>& p = emu::block->local;
  if (!p) p = std::make_unique<BlockState>();
  return static_cast<BlockState&>(*p);
}
inline Group& group() {
  const unsigned wg = threadIdx.x / 128;
  std::unique_ptr<Group>& g = block_state().groups[wg];
  if (!g) g = std::make_unique<Group>(static_cast<int>(wg));
  return *g;
}

// The shared-memory byte address of element (row r of M or N, k) of the 16-k slice a descriptor describes.
inline std::uint32_t desc_addr(std::uint64_t desc, bool mn_major, int r, int k) {
  const std::uint32_t start = static_cast<std::uint32_t>(desc & 0x3FFFu) << 4;
  const std::uint32_t lbo = static_cast<std::uint32_t>((desc >> 16) & 0x3FFFu) << 4;
  const std::uint32_t sbo = static_cast<std::uint32_t>((desc >> 32) & 0x3FFFu) << 4;
  if (((desc >> 49) & 7u) != 0) fail("descriptor base offset != 0 is not emulated");
  const unsigned mode = static_cast<unsigned>(desc >> 62);  // 0 none, 1 128B, 2 64B, 3 32B
  const std::uint32_t W = mode == 1 ? 128u : mode == 2 ? 64u : mode == 3 ? 32u : 0u;
  const auto u = [](int x) { return static_cast<std::uint32_t>(x); };
  // The swizzle is applied to the address bits (below) with base offset 0, so a swizzled operand's 8-row pattern must
  // start at a multiple of its repeat (8 W bytes: 1024 for 128B) and the start may only step inside its first row (the
  // k-slices of a K-major tile, 32 bytes apart); a start anywhere else reads the rows through another row's XOR.
  if (W != 0 && start % (8 * W) >= W) {
    char what[200];
    std::snprintf(what, sizeof what,
                  "misaligned wgmma descriptor: start address 0x%x (shared offset) is %u bytes past a multiple of %u, "
                  "outside the first %u-byte row of its %uB swizzle pattern (base offset 0)",
                  start, start % (8 * W), 8 * W, W, W);
    fail(what);
  }
  std::uint32_t a;
  if (W == 0) {  // interleave: 8 x 16-byte core matrices, 128 contiguous bytes each
    a = mn_major ? start + u(r / 8) * sbo + u(k / 8) * lbo + u(k % 8) * 16 + u(r % 8) * 2
                 : start + u(r / 8) * sbo + u(k / 8) * lbo + u(r % 8) * 16 + u(k % 8) * 2;
  } else if (!mn_major) {  // rows of W bytes, 8-row groups at SBO; the 16 k (32 bytes) inside one row
    a = start + u(r / 8) * sbo + u(r % 8) * W + u(k) * 2;
  } else {  // rows of W bytes along M/N (W/2 elements), one row per k; 8-k groups at SBO, W/2-wide atoms at LBO
    const int per = static_cast<int>(W / 2);
    a = start + u(r / per) * lbo + u(k / 8) * sbo + u(k % 8) * W + u(r % per) * 2;
  }
  if (W != 0) {
    const std::uint32_t bits = W == 128 ? 7u : W == 64 ? 3u : 1u;
    a ^= ((a >> 7) & bits) << 4;
  }
  if (smem_limit != 0 && a + 2 > smem_limit) fail("wgmma operand address past the shared memory");
  return a;
}

inline float load_bf16(std::uint32_t addr) {
  std::uint16_t x;
  std::memcpy(&x, emu::smem + addr, 2);
  return emu::bf(x);
}

// The collective: a_reg null for A from shared memory.
inline void mma(float* d, int n, int ta, const std::uint32_t* a_reg, std::uint64_t da, std::uint64_t db, int tb,
                int scale_d) {
  Group& G = group();
  const int x = static_cast<int>(threadIdx.x % 128);
  G.da[x] = a_reg ? 0 : da;
  G.db[x] = db;
  G.key[x] = n | ta << 9 | tb << 10 | (scale_d != 0) << 11 | (a_reg != nullptr) << 12;
  if (a_reg)
    for (int i = 0; i < 4; ++i) G.a[x][i] = a_reg[i];
  set_state(2);
  G.bar.arrive_and_wait();
  set_state(0);
  if (x == 0) {
    for (int y = 1; y < 128; ++y)
      if (G.da[y] != G.da[0] || G.db[y] != G.db[0] || G.key[y] != G.key[0])
        fail("wgmma operands not warpgroup-uniform");
    if (a_reg) {
      for (int y = 0; y < 128; ++y) {
        const int r = y / 32, g = (y % 32) / 4, t = y % 4;
        const int m = 16 * r + g;
        emu::split(G.a[y][0], G.A[m][2 * t], G.A[m][2 * t + 1]);
        emu::split(G.a[y][1], G.A[m + 8][2 * t], G.A[m + 8][2 * t + 1]);
        emu::split(G.a[y][2], G.A[m][2 * t + 8], G.A[m][2 * t + 9]);
        emu::split(G.a[y][3], G.A[m + 8][2 * t + 8], G.A[m + 8][2 * t + 9]);
      }
    } else {
      for (int m = 0; m < 64; ++m)
        for (int k = 0; k < 16; ++k) G.A[m][k] = load_bf16(desc_addr(da, ta != 0, m, k));
    }
    for (int k = 0; k < 16; ++k)
      for (int c = 0; c < n; ++c) G.B[k][c] = load_bf16(desc_addr(db, tb != 0, c, k));
  }
  G.bar.arrive_and_wait();
  const int r = x / 32, g = (x % 32) / 4, t = x % 4;
  // GLR_EMU_MMA_TRUNC=1: emu.hpp's pessimistic model of the tensor cores' fp32 accumulation, per 16-k step here
  // too (products exact; each addend aligned to the largest one's fp32 ulp and truncated; the sum toward zero).
  static const bool trunc = [] {
    const char* e = std::getenv("GLR_EMU_MMA_TRUNC");
    return e != nullptr && *e == '1';
  }();
  for (int i = 0; i < n / 2; ++i) {
    const int j = i / 4, h = i % 4;
    const int row = 16 * r + g + (h >= 2 ? 8 : 0), col = 8 * j + 2 * t + (h & 1);
    double term[17];
    for (int k = 0; k < 16; ++k) term[k] = static_cast<double>(G.A[row][k]) * G.B[k][col];
    term[16] = scale_d != 0 ? d[i] : 0.0;
    double s = 0;
    int emax = -100000;
    if (trunc)
      for (double v : term)
        if (v != 0 && std::isfinite(v)) emax = std::max(emax, std::ilogb(v));
    if (!trunc || emax == -100000) {
      for (double v : term) s += v;
      d[i] = static_cast<float>(s);
      continue;
    }
    const double q = std::ldexp(1.0, emax - 23);
    for (double v : term) s += std::isfinite(v) ? std::trunc(v / q) * q : v;
    float f = static_cast<float>(s);
    if (std::isfinite(f) && std::fabs(static_cast<double>(f)) > std::fabs(s)) f = std::nextafter(f, 0.0f);
    d[i] = f;
  }
  G.bar.arrive_and_wait();  // G.A / G.B stay until every thread has read them
}

// mbarrier word: bits 0-20 pending arrivals, 21-41 expected arrivals, 42-62 transaction count (21-bit two's
// complement), 63 phase.
inline std::atomic_ref<std::uint64_t> mbar(std::uint32_t addr) {
  if (addr % 8 != 0) fail("mbarrier not 8-byte aligned");
  return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(emu::smem + addr));
}
constexpr std::uint64_t kM21 = (1u << 21) - 1;
// Apply `arrivals` arrivals and `tx` transaction bytes (expect_tx: +, complete_tx: -) atomically.
inline void mbar_update(std::uint32_t addr, int arrivals, std::int64_t tx) {
  auto w = mbar(addr);
  std::uint64_t old = w.load(), nw;
  do {
    std::int64_t pending = static_cast<std::int64_t>(old & kM21);
    const std::uint64_t expected = (old >> 21) & kM21;
    std::int64_t t = static_cast<std::int64_t>((old >> 42) & kM21);
    if (t >= (1 << 20)) t -= 1 << 21;
    std::uint64_t phase = old >> 63;
    pending -= arrivals;
    t += tx;
    if (pending < 0) fail("mbarrier: more arrivals than expected in a phase");
    if (pending == 0 && t == 0) {  // the phase completes
      phase ^= 1;
      pending = static_cast<std::int64_t>(expected);
    }
    nw = static_cast<std::uint64_t>(pending) | expected << 21 | (static_cast<std::uint64_t>(t) & kM21) << 42 |
         phase << 63;
  } while (!w.compare_exchange_weak(old, nw));
}

// A failed mbarrier poll, for the deadlock report: arg = shared address << 1 | parity.
inline void describe_mbar(const void*, long long arg, char* buf, std::size_t n) {
  const std::uint32_t addr = static_cast<std::uint32_t>(arg >> 1);
  const std::uint64_t w = mbar(addr).load();
  std::int64_t t = static_cast<std::int64_t>((w >> 42) & kM21);
  if (t >= (1 << 20)) t -= 1 << 21;
  std::snprintf(buf, n,
                "mbarrier at shared byte %u, try_wait.parity(%u) (its phase bit %u, %llu of %llu arrivals pending, "
                "%lld transaction bytes)",
                addr, static_cast<unsigned>(arg & 1), static_cast<unsigned>(w >> 63),
                static_cast<unsigned long long>(w & kM21), static_cast<unsigned long long>((w >> 21) & kM21),
                static_cast<long long>(t));
}

// tma_early: wait until the block is quiescent (see tma_early), or until the scheduler finds every other thread
// unable to proceed (a stall: emu::Block::stalls; counted in quiesce_timeouts, the waiters then go on).
inline bool block_quiet() {
  for (int t = 0; t < emu::block->n; ++t) {
    const std::uint64_t v = emu::block->state[t].load();
    if (v == 0) return false;
    if (v >= 4) {
      const std::uint32_t bar = static_cast<std::uint32_t>((v - 4) >> 1), parity = static_cast<std::uint32_t>((v - 4) & 1);
      if ((mbar(bar).load() >> 63) != parity) return false;  // that poll would succeed: the thread can run
    }
  }
  return true;
}
inline void quiesce() {
  if (!tma_early) return;
  const unsigned e = emu::block->epoch.load();
  const unsigned stalls = emu::block->stalls;
  set_state(2);
  bool waited = false;
  while (emu::block->epoch.load() == e) {
    if (block_quiet()) {
      emu::block->epoch.fetch_add(1);
      break;
    }
    if (emu::block->stalls != stalls) {
      if (quiesce_timeouts.fetch_add(1) == 0)
        for (int t = 0; t < emu::block->n; ++t) {
          const std::uint64_t v = emu::block->state[t].load();
          if (v == 0 || v >= 4)
            std::fprintf(stderr, "emu_wgmma: quiescence timed out: thread %d state %llu (thread %u waiting)\n", t,
                         static_cast<unsigned long long>(v), threadIdx.x);
        }
      break;
    }
    emu::block_yield(emu::WaitDesc{&describe_text, "a wgmma_wait's quiescence (tma_early)", 0, true});
    waited = true;
  }
  if (waited) emu::progress = true;
  set_state(0);
}

// Named barrier `id` of the current block (NamedBar, above): a different count in the same generation aborts.
inline void named_arrive(int id, int count, bool wait) {
  if (id < 1 || id > 15) fail("named barrier id outside 1..15");
  if (count <= 0 || count % 32 != 0 || count > static_cast<int>(blockDim.x)) fail("named barrier count");
  NamedBar* b = &block_state().bars[id];
  b->id = id;
  if (b->arrived == 0) b->expected = count;
  if (b->expected != count) fail("named barrier: two counts in one generation");
  if (++b->arrived == count) {
    b->arrived = 0;
    ++b->gen;
    emu::progress = true;
    return;
  }
  if (wait) {
    const unsigned g = b->gen;
    emu::wait_until([&] { return b->gen != g; }, emu::WaitDesc{&NamedBar::describe, b, 0, false});
  }
}

// Deferred wgmma: issue records the operation (descriptors, scale-d, A registers by value, the accumulator
// array's address); commit closes a group; wait<N> retires every group but the N newest, in issue order, each
// as one collective (mma above) reading shared memory and the accumulators then and writing them. So a kernel
// that reads accumulators before the wait sees the values from before the wgmma, and one that overwrites an
// operand before the wait feeds the new data: both give wrong results here, as they may on the GPU. Chained
// wgmmas on one accumulator see each other's results (retired in order). Threads that end with wgmmas never
// retired count them in unretired_wgmmas (and say so on stderr).
struct PendingMma {
  float* d;
  int n, ta, tb, scale_d;
  bool a_reg;
  std::uint32_t a[4];
  std::uint64_t da, db;
  long group;
};
inline std::atomic<long> unretired_wgmmas{0};
struct ThreadMmas {
  std::vector<PendingMma> pending;
  long committed = 0;  // groups closed so far; the open group's id is `committed`
  ~ThreadMmas() {
    if (!pending.empty() && unretired_wgmmas.fetch_add(static_cast<long>(pending.size())) == 0)
      std::fprintf(stderr, "emu_wgmma: a thread ended with %zu wgmma(s) never retired by wgmma_wait\n",
                   pending.size());
  }
};
inline ThreadMmas& mmas();
inline void retire(long keep) {  // retire the groups older than the `keep` newest committed ones
  ThreadMmas& mmas = emu::wg::mmas();
  const long limit = mmas.committed - keep;
  if (!mmas.pending.empty() && mmas.pending.front().group < limit) quiesce();
  std::size_t i = 0;
  for (; i < mmas.pending.size() && mmas.pending[i].group < limit; ++i) {
    const PendingMma& e = mmas.pending[i];
    mma(e.d, e.n, e.ta, e.a_reg ? e.a : nullptr, e.da, e.db, e.tb, e.scale_d);
  }
  mmas.pending.erase(mmas.pending.begin(), mmas.pending.begin() + static_cast<std::ptrdiff_t>(i));
}

}  // namespace emu::wg

namespace glr::cuda::sm90 {

enum class Swizzle : std::uint32_t;  // wgmma.cuh: 0 none, 1 128B, 2 64B, 3 32B

// TMA 2-D: the map keeps what the twin needs; tma_load_2d copies the box element by element (zeros outside the
// matrix), swizzles the shared address as the wgmma descriptor decoding does, then completes the box's bytes.
struct alignas(64) TmaMap2d {
  const void* global = nullptr;
  std::uint64_t rows = 0, cols = 0, row_bytes = 0;
  std::uint32_t box_rows = 0, box_cols = 0;
  std::uint32_t swizzle = 0;
};
inline bool make_tma_map_2d(TmaMap2d& m, const void* global, std::uint64_t rows, std::uint64_t cols,
                            std::uint64_t row_bytes, std::uint32_t box_rows, std::uint32_t box_cols, Swizzle s) {
  const std::uint32_t sw = static_cast<std::uint32_t>(s);
  const std::uint32_t W = sw == 1 ? 128u : sw == 2 ? 64u : sw == 3 ? 32u : 0u;
  if (row_bytes % 16 != 0 || (box_cols * 2) % 16 != 0 || box_cols > 256 || box_rows > 256 || box_rows == 0 ||
      (W != 0 && box_cols * 2 > W) || reinterpret_cast<std::uintptr_t>(global) % 16 != 0)
    return false;
  m = TmaMap2d{global, rows, cols, row_bytes, box_rows, box_cols, sw};
  return true;
}
// TMA loads land late: tma_load_2d records the load; it is copied (and its bytes completed on the mbarrier) only
// when a thread next touches that mbarrier: a try_wait that finds the phase incomplete, or an arrive (re-arming
// the stage for the next round). That is the latest a GPU could deliver it to a correct kernel, so a consumer that
// reads a stage without waiting on its full barrier, or with the wrong parity, deterministically sees what was
// there before (the launch's poison, or an older k-tile). Loads never landed (nobody waited) are counted by
// tma_drop_pending, which the test calls after each launch.
struct PendingTmaLoad {
  std::uint64_t block;  // emu::Block::serial
  std::uint32_t dst, bar;
  TmaMap2d map;
  int c0, c1;
};
inline std::mutex tma_mutex;
inline std::vector<PendingTmaLoad> tma_loads;
inline void tma_load_now(const PendingTmaLoad& p) {
  const TmaMap2d& m = p.map;
  const std::uint32_t dst = p.dst;
  const int c0 = p.c0, c1 = p.c1;
  const std::uint32_t W = m.swizzle == 1 ? 128u : m.swizzle == 2 ? 64u : m.swizzle == 3 ? 32u : 0u;
  const std::uint32_t bits = W == 128 ? 7u : W == 64 ? 3u : W == 32 ? 1u : 0u;
  for (std::uint32_t i1 = 0; i1 < m.box_rows; ++i1)
    for (std::uint32_t i0 = 0; i0 < m.box_cols; ++i0) {
      const std::int64_t x = static_cast<std::int64_t>(c0) + i0, y = static_cast<std::int64_t>(c1) + i1;
      std::uint16_t v = 0;
      if (x >= 0 && y >= 0 && static_cast<std::uint64_t>(x) < m.cols && static_cast<std::uint64_t>(y) < m.rows)
        std::memcpy(&v, static_cast<const char*>(m.global) + y * m.row_bytes + x * 2, 2);
      std::uint32_t a = dst + (i1 * m.box_cols + i0) * 2;
      a ^= ((a >> 7) & bits) << 4;
      if (emu::wg::smem_limit != 0 && a + 2 > emu::wg::smem_limit) emu::wg::fail("TMA past the shared memory");
      std::memcpy(emu::smem + a, &v, 2);
    }
  emu::wg::mbar_update(p.bar, 0, -static_cast<std::int64_t>(m.box_rows * m.box_cols * 2));
}
// Land this block's pending loads on mbarrier `bar`, in issue order.
inline void tma_land(std::uint32_t bar) {
  std::vector<PendingTmaLoad> mine;
  {
    std::lock_guard<std::mutex> lock(tma_mutex);
    if (tma_loads.empty()) return;
    std::vector<PendingTmaLoad> rest;
    for (auto& p : tma_loads) (p.block == emu::block->serial && p.bar == bar ? mine : rest).push_back(p);
    tma_loads.swap(rest);
  }
  for (const auto& p : mine) tma_load_now(p);
  if (!mine.empty()) emu::progress = true;
}
// Between launches: drop the loads never landed, returning how many there were.
inline long tma_drop_pending() {
  std::lock_guard<std::mutex> lock(tma_mutex);
  const long n = static_cast<long>(tma_loads.size());
  tma_loads.clear();
  return n;
}
inline void tma_load_2d(std::uint32_t dst, const TmaMap2d& m, int c0, int c1, std::uint32_t bar) {
  const std::uint32_t W = m.swizzle == 1 ? 128u : m.swizzle == 2 ? 64u : m.swizzle == 3 ? 32u : 0u;
  const std::uint32_t align = W == 0 ? 128u : 8 * W;
  if (dst % align != 0) emu::wg::fail("tma_load_2d: shared destination not aligned to the swizzle pattern");
  emu::wg::mbar(bar);  // the alignment check
  if (emu::wg::tma_early || emu::wg::tma_at_issue) return tma_load_now({emu::block->serial, dst, bar, m, c0, c1});
  std::lock_guard<std::mutex> lock(tma_mutex);
  tma_loads.push_back({emu::block->serial, dst, bar, m, c0, c1});
}

// TMA stores, deferred like wgmma: issue records (map, coordinates, source); bulk_commit closes a group;
// bulk_wait_read / bulk_wait retire all but the N newest groups, reading shared memory then (so a source
// overwritten before the wait is stored as overwritten). Stores never retired count in unretired_stores.
struct PendingStore {
  TmaMap2d map;
  int c0, c1;
  std::uint32_t src;
  long group;
};
inline std::atomic<long> unretired_stores{0};
struct ThreadStores {
  std::vector<PendingStore> pending;
  long committed = 0;
  ~ThreadStores() {
    if (!pending.empty() && unretired_stores.fetch_add(static_cast<long>(pending.size())) == 0)
      std::fprintf(stderr, "emu_wgmma: a thread ended with %zu TMA store(s) never waited for\n", pending.size());
  }
};
}  // namespace glr::cuda::sm90

namespace emu::wg {
// A CUDA thread's own state (its fiber's, emu.hpp: made at its first use, ended with the thread, when ThreadMmas and
// ThreadStores count what it left unretired).
struct ThreadState : emu::FiberLocal {
  ThreadMmas mmas;
  glr::cuda::sm90::ThreadStores stores;
};
inline ThreadState& thread_state() {
  std::unique_ptr<emu::FiberLocal>& p = emu::current_fiber()->local;
  if (!p) p = std::make_unique<ThreadState>();
  return static_cast<ThreadState&>(*p);
}
inline ThreadMmas& mmas() { return thread_state().mmas; }
}  // namespace emu::wg

namespace glr::cuda::sm90 {
inline ThreadStores& stores() { return emu::wg::thread_state().stores; }
inline void tma_store_now(const PendingStore& p) {
  const TmaMap2d& m = p.map;
  const std::uint32_t W = m.swizzle == 1 ? 128u : m.swizzle == 2 ? 64u : m.swizzle == 3 ? 32u : 0u;
  const std::uint32_t bits = W == 128 ? 7u : W == 64 ? 3u : W == 32 ? 1u : 0u;
  for (std::uint32_t i1 = 0; i1 < m.box_rows; ++i1)
    for (std::uint32_t i0 = 0; i0 < m.box_cols; ++i0) {
      const std::int64_t x = static_cast<std::int64_t>(p.c0) + i0, y = static_cast<std::int64_t>(p.c1) + i1;
      if (x < 0 || y < 0 || static_cast<std::uint64_t>(x) >= m.cols || static_cast<std::uint64_t>(y) >= m.rows)
        continue;
      std::uint32_t a = p.src + (i1 * m.box_cols + i0) * 2;
      a ^= ((a >> 7) & bits) << 4;
      std::memcpy(const_cast<char*>(static_cast<const char*>(m.global)) + y * m.row_bytes + x * 2, emu::smem + a, 2);
    }
}
inline void tma_store_2d(const TmaMap2d& m, int c0, int c1, std::uint32_t src) {
  const std::uint32_t W = m.swizzle == 1 ? 128u : m.swizzle == 2 ? 64u : m.swizzle == 3 ? 32u : 0u;
  if (src % (W == 0 ? 128u : 8 * W) != 0)
    emu::wg::fail("tma_store_2d: shared source not aligned to the swizzle pattern");
  stores().pending.push_back({m, c0, c1, src, stores().committed});
}
inline void bulk_commit() { ++stores().committed; }
inline void bulk_retire(long keep) {
  ThreadStores& stores = glr::cuda::sm90::stores();
  const long limit = stores.committed - keep;
  std::size_t i = 0;
  for (; i < stores.pending.size() && stores.pending[i].group < limit; ++i) tma_store_now(stores.pending[i]);
  stores.pending.erase(stores.pending.begin(), stores.pending.begin() + static_cast<std::ptrdiff_t>(i));
}
template <int N>
inline void bulk_wait_read() {
  bulk_retire(N);
}
template <int N>
inline void bulk_wait() {
  bulk_retire(N);
}

inline void named_barrier_sync(int id, int count) { emu::wg::named_arrive(id, count, true); }
inline void named_barrier_arrive(int id, int count) { emu::wg::named_arrive(id, count, false); }
template <int R>
inline void setmaxnreg_inc() {
  static_assert(R % 8 == 0 && R >= 24 && R <= 256);
}
template <int R>
inline void setmaxnreg_dec() {
  static_assert(R % 8 == 0 && R >= 24 && R <= 256);
}

inline void wgmma_fence() {}
inline void wgmma_commit() { ++emu::wg::mmas().committed; }
template <int N>
inline void wgmma_wait() {
  emu::wg::retire(N);
}
template <int R>
inline void wgmma_fence_operand(float (&)[R]) {}
template <int R>
inline void wgmma_fence_operand(std::uint32_t (&)[R]) {}
inline void fence_proxy_async() {}

template <int N, int TA, int TB>
inline void wgmma_ss(float (&d)[N / 2], std::uint64_t da, std::uint64_t db, int scale_d) {
  static_assert(N % 8 == 0 && N >= 8 && N <= 256);
  emu::wg::ThreadMmas& mmas = emu::wg::mmas();
  mmas.pending.push_back({d, N, TA, TB, scale_d, false, {0, 0, 0, 0}, da, db, mmas.committed});
}
template <int N, int TB>
inline void wgmma_rs(float (&d)[N / 2], const std::uint32_t (&a)[4], std::uint64_t db, int scale_d) {
  static_assert(N % 8 == 0 && N >= 8 && N <= 256);
  emu::wg::ThreadMmas& mmas = emu::wg::mmas();
  mmas.pending.push_back({d, N, 0, TB, scale_d, true, {a[0], a[1], a[2], a[3]}, 0, db, mmas.committed});
}

inline void mbarrier_init(std::uint32_t bar, std::uint32_t count) {
  if (count == 0 || count > (1u << 20) - 1) emu::wg::fail("mbarrier_init: count out of range");
  emu::wg::mbar(bar).store(static_cast<std::uint64_t>(count) | static_cast<std::uint64_t>(count) << 21);
}
inline void fence_mbarrier_init() {}
inline void mbarrier_arrive(std::uint32_t bar) {
  tma_land(bar);
  emu::wg::mbar_update(bar, 1, 0);
}
inline void mbarrier_arrive_expect_tx(std::uint32_t bar, std::uint32_t bytes) {
  tma_land(bar);
  emu::wg::mbar_update(bar, 1, static_cast<std::int64_t>(bytes));
}
inline bool mbarrier_try_wait_parity(std::uint32_t bar, std::uint32_t parity) {
  bool done = (emu::wg::mbar(bar).load() >> 63) != (parity & 1u);
  if (!done) {
    tma_land(bar);
    done = (emu::wg::mbar(bar).load() >> 63) != (parity & 1u);
  }
  emu::wg::set_state(done ? 0 : 4 + (static_cast<std::uint64_t>(bar) << 1 | (parity & 1u)));
  // A failed poll waits a turn (the next poll is the caller's, mbarrier_wait_parity's loop): for the deadlock check
  // a failed poll changes nothing, a successful one is progress.
  if (done)
    emu::progress = true;
  else
    emu::block_yield(
        emu::WaitDesc{&emu::wg::describe_mbar, nullptr, static_cast<long long>(bar) << 1 | (parity & 1u), false});
  return done;
}
inline void bulk_copy_g2s(std::uint32_t dst, const void* src, std::uint32_t bytes, std::uint32_t bar) {
  if (bytes % 16 != 0 || dst % 16 != 0 || reinterpret_cast<std::uintptr_t>(src) % 16 != 0)
    emu::wg::fail("bulk_copy_g2s: size and addresses must be multiples of 16");
  if (emu::wg::smem_limit != 0 && dst + bytes > emu::wg::smem_limit) emu::wg::fail("bulk copy past the shared memory");
  std::memcpy(emu::smem + dst, src, bytes);
  emu::wg::mbar_update(bar, 0, -static_cast<std::int64_t>(bytes));
}

}  // namespace glr::cuda::sm90
