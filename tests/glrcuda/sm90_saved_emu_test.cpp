// The forward's saved intermediates through glr's sm90 host code on the host emulator (glr_sm90_emu: sm90/forward.cu
// and backward.cu unchanged, the kernels emulated): launch_forward leaves its wy outputs in a saved block, and
// launch_backward given it returns every output and the status word bit for bit as launch_backward without it,
// and the saving forward's o and ht are the plain forward's bit for bit (tolerance-free; dense with GVA, invalid
// packed offsets), and differently from a zeroed block; a short
// or misaligned block is refused by name ("saved"). The public API's key check needs a device: gpu_test.cpp
// BackwardSavedIntermediates. ctest label glrcuda, no GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "case.hpp"
#include "common/setup.hpp"
#include "sm90/backward.hpp"
#include "sm90/forward.hpp"

namespace glr::cudatest {
namespace {

// n bytes from a 256-byte aligned start, every byte `fill`.
struct Aligned {
  std::vector<unsigned char> raw;
  unsigned char* p = nullptr;
  std::size_t n = 0;
  Aligned(std::size_t bytes, unsigned char fill) : raw(bytes + 256, fill), n(bytes) {
    p = raw.data() + (256 - reinterpret_cast<std::uintptr_t>(raw.data()) % 256) % 256;
  }
};

// Packed offsets: the host copy is what the emulated kernels read.
cuda::DeviceOffsets offsets_of(const Case& c) { return {c.call.varlen() ? c.call.cu_seqlens.data() : nullptr, 0}; }

struct BackwardRun {
  Results r;
  std::int32_t status = -1;
};

void saved_matches_recomputed(const Case& c, bool bad_offsets = false) {
  std::vector<std::int64_t> cu = c.call.cu_seqlens;
  if (bad_offsets) cu.back() -= 1;  // cu[N] != T: status 1, every output NaN (checked on the "device")
  cuda::DeviceOffsets off = offsets_of(c);
  Params call = c.call;
  if (bad_offsets) {  // device-only offsets (the host copy would be refused on the host)
    call.cu_seqlens.clear();
    off = {cu.data(), static_cast<std::int64_t>(cu.size()) - 1};
  }
  CallTensors f = make_call(c);
  const cuda::Problem pf = cuda::setup_forward(call, f.forward(), off);
  ASSERT_EQ(cuda::sm90::forward_refusal(pf), "") << c.describe();
  Aligned fws(cuda::sm90::forward_workspace_bytes(pf), 0);
  const std::size_t bytes = cuda::sm90::saved_bytes(pf);
  Aligned saved(bytes, 0x7f);
  cuda::sm90::launch_forward(pf, fws.p, fws.n, nullptr, saved.p, bytes);
  {  // a saving forward's o and ht are the plain forward's word for word (both form T from Gr)
    CallTensors plain = make_call(c);
    const cuda::Problem pp = cuda::setup_forward(call, plain.forward(), off);
    Aligned pws(cuda::sm90::forward_workspace_bytes(pp), 0);
    cuda::sm90::launch_forward(pp, pws.p, pws.n, nullptr, nullptr, 0);
    EXPECT_EQ(diff_results(f.read(false), plain.read(false)), "") << "saving vs plain forward " << c.describe();
  }
  auto backward = [&](bool use) {
    CallTensors b = make_call(c);  // outputs poisoned (NaN bytes): every element must be written
    const cuda::Problem pb = cuda::setup_backward(call, b.backward(), off);
    Aligned ws(cuda::sm90::backward_workspace_bytes(pb), use ? 0x55 : 0x7f);
    cuda::sm90::launch_backward(pb, ws.p, ws.n, nullptr, use ? saved.p : nullptr, use ? bytes : 0);
    BackwardRun run;
    run.r = b.read(true);
    std::memcpy(&run.status, ws.p, sizeof(run.status));
    return run;
  };
  const BackwardRun recomputed = backward(false), from_saved = backward(true);
  EXPECT_EQ(diff_results(from_saved.r, recomputed.r), "") << "saved vs recomputed " << c.describe();
  EXPECT_EQ(from_saved.status, recomputed.status) << c.describe();
  EXPECT_EQ(recomputed.status, bad_offsets ? 1 : 0) << c.describe();
  if (!c.call.varlen()) {  // the checker's own check: the backward does read the block (zeroed: T = 0, G = 0)
    std::memset(saved.p, 0, bytes);
    EXPECT_NE(diff_results(backward(true).r, recomputed.r), "") << "a zeroed saved block changed nothing";
  }
  std::printf("saved %s%s: %zu bytes, status %d\n", c.describe().c_str(), bad_offsets ? " (invalid offsets)" : "",
              bytes, from_saved.status);
}

TEST(Sm90SavedEmu, BackwardFromSavedIsBitwiseTheRecomputingOne) {
  std::uint64_t seed = 1700;
  saved_matches_recomputed(make_case(Member::gated_deltanet, {"K64_B2_T100_H1_HV2", 2, 100, 1, 2, 64, 64, {}, true},
                                     {DType::bf16}, {}, seed++));
  const Shape packed{"K64_varlen_HV2", 1, 100, 1, 2, 64, 64, {0, 65, 65, 100}, true};
  saved_matches_recomputed(make_case(Member::gated_deltanet, packed, {DType::bf16}, {}, seed++), true);
  // (valid packed sequences and the members without the delta rule: tests/glr_sm90 emu_bwd_saved.inc)
}

TEST(Sm90SavedEmu, ShortOrMisalignedSavedIsRefused) {
  const Case c = make_case(Member::gated_deltanet, {"K64_T64", 1, 64, 1, 1, 64, 64, {}, false}, {DType::bf16}, {}, 1710);
  CallTensors f = make_call(c);
  const cuda::Problem pf = cuda::setup_forward(c.call, f.forward(), {});
  Aligned fws(cuda::sm90::forward_workspace_bytes(pf), 0);
  const std::size_t bytes = cuda::sm90::saved_bytes(pf);
  Aligned saved(bytes + 256, 0);
  for (const auto& [at, n] : {std::pair{saved.p, bytes - 1}, std::pair{saved.p + 16, bytes}}) {
    try {
      cuda::sm90::launch_forward(pf, fws.p, fws.n, nullptr, at, n);
      ADD_FAILURE() << "a short or misaligned saved block was taken";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(e.argument(), "saved") << e.what();
    }
  }
}

}  // namespace
}  // namespace glr::cudatest
