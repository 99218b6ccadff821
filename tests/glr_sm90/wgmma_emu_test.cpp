// tests/glr_sm90/wgmma_emu_test.cpp: the wgmma / mbarrier / named-barrier / bulk-copy / TMA wrappers
// (glr/cuda/sm90/wgmma.cuh) on the host emulator (emu_wgmma.hpp), no GPU, about a second. First the emulator's
// descriptor decoding against the PTX ISA's worked layout examples. Then the kernels and cases of
// tests/glr_sm90/wgmma_case.cuh, the same source bench/glr/sm90_wgmma_check.cu runs on an H200: every swizzle
// mode (none, 32B, 64B, 128B) x B K-major / MN-major x A from shared memory (K-, MN-major) or registers x N 64,
// 128 x both layout orders, 4 accumulated k-steps, each against a float64 matmul of the same bf16 values (bound
// 2^-16 sum |a b| per element); deliberate faults (B's SBO + 16 bytes, B's or A's swizzle mode, B's transpose
// bit; the accumulators read without wgmma_wait, B overwritten while the wgmmas are in flight), each of which
// must give a result outside the bound; TMA 2-D tile loads into the canonical layouts feeding wgmma (every
// swizzle, rows outside the map zero-filled) and TMA stores back; the pipelined producer/consumer GEMM (a TMA
// producer warpgroup, a ring of 2-4 mbarrier stages, 1-2 wgmma consumer warpgroups: blocks of 256 and 384
// threads; also under the emulator's other schedule: TMA landing at issue, wgmma reads at quiescence) with its
// faults (no full-barrier wait, wrong parity; a stage released before its wgmmas retired); 6 mbarrier phases of 128 arrivals; the named
// barriers; cp.async's model (check_cp_async: a schedule that waits and one of three that do not); the alignment
// checks (check_alignment: planted misaligned cp.async, ldmatrix, descriptor, vector store must abort, aligned ones run).
// Build and run: ctest -R glr_sm90_wgmma_emu, or
//   g++ -std=c++20 -O2 -DGLR_SM90_HOST_EMU -I/usr/local/cuda/include tests/glr_sm90/wgmma_emu_test.cpp -lpthread
#include "emu_wgmma.hpp"

#include "wgmma_case.cuh"

#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <utility>

namespace glr::wgtest {
alignas(1024) char wg_smem_raw[kSmemBytes];
}

namespace {

// The emulator's descriptor decoding (emu::wg::desc_addr) against the PTX ISA's own worked examples ("Canonical
// Layouts", the "Exact layout" of each figure, CuTe notation (shape):(stride) in elements, colexicographic),
// evaluated here by a ten-line layout evaluator, not by the formulas the decoder uses. The bf16 examples are
// the ISA's MN-major none / 32B / 64B ones verbatim; the K-major ones are the ISA's tf32 examples (none, 32B)
// with T = 8 for bf16, and the 64B / 128B K-major and 128B MN-major rows of the canonical-layout table at m = k = 2.
struct Mode {
  int n;
  int shape[3];
  long stride[3];
};
long eval(const Mode& m, int x) {
  long off = 0;
  for (int i = 0; i < m.n; ++i) {
    off += (x % m.shape[i]) * m.stride[i];
    x /= m.shape[i];
  }
  return off;
}
int size(const Mode& m) {
  int s = 1;
  for (int i = 0; i < m.n; ++i) s *= m.shape[i];
  return s;
}
struct Example {
  const char* name;
  bool mn_major;
  unsigned mode;  // descriptor swizzle field: 0 none, 1 128B, 2 64B, 3 32B
  int bbits;      // Swizzle<B, 4, 3>
  Mode mn, k;     // the exact layout's two modes, strides in bf16 elements
  std::uint32_t lbo, sbo;
};

int check_ptx_examples() {
  const Example ex[] = {
      // PTX: MN-major, no swizzle, bf16: ((8,1,2),(8,2)):((1,8,64),(8,128)), LBO 128*2, SBO 64*2
      {"MN none (PTX bf16 example)", true, 0, 0, {3, {8, 1, 2}, {1, 8, 64}}, {2, {8, 2}, {8, 128}}, 256, 128},
      // PTX: MN-major, 32B, bf16: ((8,2,2),(8,2)):((1,8,128),(16,256)), LBO 128*2, SBO 256*2
      {"MN 32B (PTX bf16 example)", true, 3, 1, {3, {8, 2, 2}, {1, 8, 128}}, {2, {8, 2}, {16, 256}}, 256, 512},
      // PTX: MN-major, 64B, bf16: ((8,4,2),(8,2)):((1,8,256),(32,512)), LBO 256*2, SBO 512*2
      {"MN 64B (PTX bf16 example)", true, 2, 2, {3, {8, 4, 2}, {1, 8, 256}}, {2, {8, 2}, {32, 512}}, 512, 1024},
      // Table, MN-major 128B, T = 8, m = k = 2: ((8,8,2),(8,2)):((1,8,LBO),(64,SBO)), LBO 1024 el, SBO 512 el
      {"MN 128B (table, m=k=2)", true, 1, 3, {3, {8, 8, 2}, {1, 8, 1024}}, {2, {8, 2}, {64, 512}}, 2048, 1024},
      // PTX tf32 K-major none ((8,2),(4,4)):((4,32),(1,64)) at T = 8: ((8,2),(8,2)):((8,64),(1,128))
      {"K none (PTX example at T=8)", false, 0, 0, {2, {8, 2}, {8, 64}}, {2, {8, 2}, {1, 128}}, 256, 128},
      // PTX tf32 K-major 32B ((8,2),(4,4)):((8,64),(1,4)) at T = 8: ((8,2),(8,2)):((16,128),(1,8))
      {"K 32B (PTX example at T=8)", false, 3, 1, {2, {8, 2}, {16, 128}}, {2, {8, 2}, {1, 8}}, 16, 256},
      // Table, K-major 64B: ((8,m),(T,2k)):((4T,SBO),(1,T)), SBO 512 B = 256 el
      {"K 64B (table, m=2)", false, 2, 2, {2, {8, 2}, {32, 256}}, {2, {8, 2}, {1, 8}}, 16, 512},
      // Table, K-major 128B: ((8,m),(T,2k)):((8T,SBO),(1,T)), SBO 1024 B = 512 el
      {"K 128B (table, m=2)", false, 1, 3, {2, {8, 2}, {64, 512}}, {2, {8, 2}, {1, 8}}, 16, 1024},
  };
  int failures = 0;
  for (const auto& e : ex) {
    const std::uint32_t base = 4096;  // 1024-aligned
    const std::uint64_t desc = static_cast<std::uint64_t>(base >> 4) | static_cast<std::uint64_t>(e.lbo >> 4) << 16 |
                               static_cast<std::uint64_t>(e.sbo >> 4) << 32 | static_cast<std::uint64_t>(e.mode) << 62;
    int bad = 0;
    for (int r = 0; r < size(e.mn); ++r)
      for (int k = 0; k < 16; ++k) {
        std::uint32_t want = base + static_cast<std::uint32_t>(2 * (eval(e.mn, r) + eval(e.k, k)));
        want ^= ((want >> 7) & ((1u << e.bbits) - 1)) << 4;  // Swizzle<B,4,3> on the byte address
        bad += emu::wg::desc_addr(desc, e.mn_major, r, k) != want;
      }
    std::printf("descriptor decode vs PTX layout %-30s %3d x 16 elements, %d differ  %s\n", e.name, size(e.mn), bad,
                bad ? "FAIL" : "PASS");
    failures += bad != 0;
  }
  return failures;
}

}  // namespace

// cp.async as emu.hpp models it (the copy lands at the issuing thread's cp_async_wait, its destination NaN until then):
// 128 threads stream 4 rounds of 16 bytes each through a ring of two 2 KB tiles, one commit group a round, two rounds
// in flight, each thread reading another thread's piece (t + 37) once its round has landed. mode 0, the schedule a
// GPU needs (wait<1>, barrier, read, barrier, refill), must copy every word; the faults, each of which a GPU may let
// through by timing, must read NaN somewhere: 1 reads without waiting, 2 waits for the wrong group (wait<2>), 3
// refills a tile before the barrier that says every thread has read it.
struct CpCase {
  const std::uint32_t* src;
  std::uint32_t* out;
  int mode;
};
void cp_async_kernel(CpCase c) {
  using namespace glr::cuda::sm90;
  const int t = static_cast<int>(threadIdx.x);
  constexpr int kRounds = 4;
  char* const ring = glr::wgtest::wg_smem_raw;
  auto issue = [&](int r) {
    if (r < kRounds) cp_async_16(smem_addr(ring + (r % 2) * 2048 + t * 16), c.src + (r * 128 + t) * 4, true);
    cp_async_commit();
  };
  issue(0);
  issue(1);
  for (int r = 0; r < kRounds; ++r) {
    if (c.mode == 0 || c.mode == 3) cp_async_wait<1>();
    if (c.mode == 2) cp_async_wait<2>();
    __syncthreads();
    std::memcpy(&c.out[r * 128 + t], ring + (r % 2) * 2048 + ((t + 37) % 128) * 16, 4);
    if (c.mode != 3) __syncthreads();
    issue(r + 2);
  }
  cp_async_wait<0>();
}
int check_cp_async() {
  std::vector<std::uint32_t> src(4 * 128 * 4), out(4 * 128);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint32_t>(i * 2654435761u) & 0x3f7fffffu;
  int failures = 0;
  const char* what[] = {"the GPU's schedule", "read without a wait", "wait for the wrong group", "refill before the barrier"};
  for (int mode = 0; mode < 4; ++mode) {
    std::fill(out.begin(), out.end(), 0u);
    emu::launch(&cp_async_kernel, 1, 1, glr::wgtest::wg_smem_raw, 4096, CpCase{src.data(), out.data(), mode});
    int wrong = 0, nan = 0;
    for (int r = 0; r < 4; ++r)
      for (int t = 0; t < 128; ++t) {
        const std::uint32_t got = out[r * 128 + t], want = src[(r * 128 + (t + 37) % 128) * 4];
        wrong += got != want;
        nan += got == 0xffffffffu;
      }
    const bool ok = mode == 0 ? wrong == 0 : nan > 0;
    std::printf("cp.async, %s: %d of 512 words wrong, %d NaN  %s\n", what[mode], wrong, nan, ok ? "PASS" : "FAIL");
    failures += !ok;
  }
  return failures;
}

// The emulator's alignment checks (emu.hpp "Alignment", emu_wgmma.hpp desc_addr), positive controls: each planted
// misaligned access runs in a child process and must abort it naming the fault; the same accesses aligned (mode 0)
// must run. Mode 1 is the h pass's GLR_H_PREFETCH fault of 2026-12-07 in small: 16-byte copies into a row of floats
// that a struct puts after an int (byte 260). Mode 5, a plain uint4 store, needs the alignment sanitizer
// (tests/glr_sm90/CMakeLists.txt glr_sm90_emu_align_checks), which reports it with its source line.
struct CarveSmem {
  float a[64];
  int n;
  float b[64];  // byte 260: 4 past a multiple of 16
};
struct AlignCase {
  const std::uint32_t* src;
  int mode;
};
void align_kernel(AlignCase c) {
  using namespace glr::cuda::sm90;
  const int t = static_cast<int>(threadIdx.x);
  char* const s = glr::wgtest::wg_smem_raw;
  char* const tile = s + 1024;
  CarveSmem& carve = *reinterpret_cast<CarveSmem*>(s);
  if (c.mode == 0) {  // every access aligned
    cp_async_16(smem_addr(tile + t * 16), c.src + t * 4, true);
    if (t < 16) cp_async_16(smem_addr(carve.a + 4 * t), c.src + 4 * t, true);
  }
  if (c.mode == 1 && t < 16) cp_async_16(smem_addr(carve.b + 4 * t), c.src + 4 * t, true);
  if (c.mode == 2) cp_async_16(smem_addr(tile + t * 16), c.src + t * 4 + 1, true);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  std::uint32_t r[4];
  if (c.mode == 0) ldmatrix_x4(r, smem_addr(tile + (t % 32) * 16));
  if (c.mode == 3) ldmatrix_x4(r, smem_addr(tile + (t % 32) * 16 + 8));
  if (c.mode == 0) *reinterpret_cast<uint4*>(tile + 2048 + t * 16) = make_uint4(1u, 2u, 3u, 4u);
  if (c.mode == 5) *reinterpret_cast<uint4*>(tile + 2048 + t * 16 + 8) = make_uint4(1u, 2u, 3u, 4u);
}
// Run mode m in a child; return what it wrote to stderr and whether it exited 0.
std::pair<std::string, bool> run_align_child(int m) {
  int fd[2];
  if (pipe(fd) != 0) return {"pipe failed", false};
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    dup2(fd[1], 2);
    std::vector<std::uint32_t> src(4 * 128 + 16, 1u);
    glr::cuda::sm90::CpAsyncBoundsScope bounds;
    bounds.add(src);
    if (m == 4 || m == 6) {  // a 128B-swizzled K-major descriptor: start at row 2 of its pattern (4), at a k-slice (6)
      const std::uint32_t start = m == 4 ? 1024 + 256 : 1024 + 32;
      const std::uint64_t desc = (start >> 4) | (std::uint64_t{1024 >> 4} << 32) | (std::uint64_t{1} << 62);
      (void)emu::wg::desc_addr(desc, false, 0, 0);
    } else {
      emu::launch(&align_kernel, 1, 1, glr::wgtest::wg_smem_raw, 8192, AlignCase{src.data(), m});
    }
    std::fflush(stderr);
    _exit(0);
  }
  close(fd[1]);
  std::string err;
  char buf[512];
  for (ssize_t n; (n = read(fd[0], buf, sizeof buf)) > 0;) err.append(buf, static_cast<std::size_t>(n));
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return {err, WIFEXITED(status) && WEXITSTATUS(status) == 0};
}
int check_alignment() {
  struct Plant {
    int mode;
    const char* what;
    const char* needle;  // in the child's stderr; null: the child must run to its end
  };
  const Plant plants[] = {
      {0, "every access aligned", nullptr},
      {6, "descriptor at a k-slice of its pattern's first row", nullptr},
      {1, "cp.async into floats placed after an int (shared + 260)", "misaligned cp.async destination"},
      {2, "cp.async from a registered buffer + 4 bytes", "misaligned cp.async source: thread "},
      {3, "ldmatrix row address + 8", "misaligned ldmatrix row address"},
      {4, "128B-swizzled descriptor starting at row 2 of its pattern", "misaligned wgmma descriptor"},
#if defined(GLR_EMU_ALIGN_SANITIZED)
      {5, "uint4 store to shared + 8 (the alignment sanitizer)", "misaligned address"},
#endif
  };
  int failures = 0;
  for (const Plant& p : plants) {
    const auto [err, ran] = run_align_child(p.mode);
    // (the source's message names the registered buffer and the offset in it: the thread is the first to issue)
    const bool named = p.mode != 2 || err.find("(registered buffer 0 of 1 (base ") != std::string::npos;
    const bool ok = p.needle == nullptr ? ran && err.empty() : !ran && named && err.find(p.needle) != std::string::npos;
    const std::size_t nl = err.find('\n');
    std::printf("alignment, %s: %s  %s\n", p.what, err.empty() ? "ran" : err.substr(0, nl).c_str(), ok ? "PASS" : "FAIL");
    failures += !ok;
  }
#if !defined(GLR_EMU_ALIGN_SANITIZED)
  std::printf("alignment: plain vector stores unchecked (built without -fsanitize=alignment)\n");
#endif
  return failures;
}

int main() {
  using namespace glr::wgtest;
  int failures = check_ptx_examples();
  failures += check_cp_async();
  failures += check_alignment();
  emu::wg::smem_limit = kSmemBytes;
  failures += run_specs([](const Spec& s, Case& c, const std::vector<std::uint16_t>& a,
                              const std::vector<std::uint16_t>& b, std::vector<float>& d) {
    c.a = reinterpret_cast<const __nv_bfloat16*>(a.data());
    c.b = reinterpret_cast<const __nv_bfloat16*>(b.data());
    c.d = d.data();
    with_kernel(s, [&](void (*k)(Case)) { emu::launch(k, 1, 1, wg_smem_raw, kSmemBytes, c); });
  }, true);
  failures += run_tma_specs([](TmaCase& c, const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b,
                                std::vector<float>& d, std::vector<int>& mismatch, std::vector<std::uint16_t>& a_out) {
    using glr::cuda::sm90::make_tma_map_2d;
    const int wa = c.sw == Swizzle::None ? 8 : static_cast<int>(glr::cuda::sm90::swizzle_bytes(c.sw) / 2);
    if (!make_tma_map_2d(c.ma, a.data(), c.a_rows, c.k, c.k * 2, 64, wa, c.sw) ||
        !make_tma_map_2d(c.mb, b.data(), c.k, c.n, c.n * 2, c.k, wa, c.sw) ||
        !make_tma_map_2d(c.mo, a_out.data(), c.a_rows, c.k, c.k * 2, 64, wa, c.sw))
      return false;
    c.a = reinterpret_cast<const __nv_bfloat16*>(a.data());
    c.b = reinterpret_cast<const __nv_bfloat16*>(b.data());
    c.d = d.data();
    c.mismatch = mismatch.data();
    emu::wg::smem_limit = kSmemBytes;
    if (c.n == 64)
      emu::launch(&tma_wgmma_kernel<64>, 1, 1, wg_smem_raw, kSmemBytes, c);
    else
      emu::launch(&tma_wgmma_kernel<128>, 1, 1, wg_smem_raw, kSmemBytes, c);
    return true;
  });
  // The pipelined producer/consumer GEMM (2-3 warpgroups a block); a good case leaves no TMA load unlanded.
  long unlanded = 0;
  failures += run_pipe_specs([&unlanded](const PipeSpec& s, PipeCase& c, const std::vector<std::uint16_t>& a,
                                         const std::vector<std::uint16_t>& b, std::vector<float>& out) {
    using glr::cuda::sm90::make_tma_map_2d;
    if (!make_tma_map_2d(c.ma, a.data(), c.m, c.k, c.k * 2, c.m, 64, Swizzle::B128) ||
        !make_tma_map_2d(c.mb, b.data(), c.k, c.n, c.n * 2, 64, 64, Swizzle::B128))
      return false;
    c.c = out.data();
    emu::wg::smem_limit = kPipeSmemBytes;
    emu::wg::tma_early = s.early != 0;
    with_pipe_kernel(s, [&](void (*k)(PipeCase)) { emu::launch(k, 1, 1, wg_smem_raw, kPipeSmemBytes, c, 128 * (s.nc + 1)); });
    const long left = glr::cuda::sm90::tma_drop_pending();
    if (s.bad == 0) unlanded += left;
    emu::wg::tma_early = false;
    return true;
  }, true);
  const long qt = emu::wg::quiesce_timeouts.load();
  std::printf("pipeline: quiescence waits timed out: %ld  %s\n", qt, qt ? "FAIL" : "PASS");
  failures += qt != 0;
  std::printf("pipeline: TMA loads never landed in the good cases: %ld  %s\n", unlanded, unlanded ? "FAIL" : "PASS");
  failures += unlanded != 0;
  // Fault 5 left its wgmmas unretired (by design); nothing else may.
  const long unretired = emu::wg::unretired_wgmmas.load();
  const long expected_unretired = 2 * 128 * 4;  // two fault-5 cases x 128 threads x 4 k-steps
  std::printf("wgmmas never retired by a wait: %ld (the two no-wait faults leave %ld)  %s\n", unretired,
              expected_unretired, unretired == expected_unretired ? "PASS" : "FAIL");
  failures += unretired != expected_unretired;
  const long unretired_stores = glr::cuda::sm90::unretired_stores.load();
  std::printf("TMA stores never waited for: %ld  %s\n", unretired_stores, unretired_stores ? "FAIL" : "PASS");
  failures += unretired_stores != 0;
  std::vector<int> errors(128, -1);
  emu::wg::smem_limit = kMbarSmemBytes;
  emu::launch(&mbarrier_phase_kernel, 1, 1, wg_smem_raw, kMbarSmemBytes, MbarCase{6, errors.data()});
  failures += barrier_verdict("mbarrier: 6 phases x 128 arrivals", "a wrong slot or did not finish", errors);
  errors.assign(128, -1);
  emu::launch(&named_barrier_kernel, 1, 1, wg_smem_raw, kMbarSmemBytes, MbarCase{0, errors.data()});
  failures += barrier_verdict("named barriers: two 64-thread groups x 4 rounds, producer/consumer warps x 3 rounds",
                              "a wrong slot", errors);
  std::printf("%s\n", failures ? "FAILED" : "ALL PASS");
  return failures ? 1 : 0;
}
