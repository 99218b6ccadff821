// The backward's dispatch logic without a GPU (ctest label glrcuda): which calls the sm90 tensor-core backward
// takes (sm90::backward_refusal is "" for them; the device is looked at only after it), which it refuses and with
// what reason (cuda::backward_path reaches its answer before any CUDA call for these), GLR_BACKWARD_PATH and
// BackwardOptions::force_blocks, and the per-path workspace sizes. The tensors live in host memory: nothing
// here reads them. tests/glrcuda/gpu_test.cpp runs the same calls on a GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "capi/glr_capi.h"
#include "case.hpp"
#include "common/setup.hpp"
#include "glr/glr_cuda.hpp"
#include "scoped_env.hpp"
#include "sm90/backward.hpp"
#include "sm90/env_switch.hpp"

namespace glr::cudatest {
namespace {

const Shape kK128{"K128_T130", 1, 130, 1, 1, 128, 128, {}, true};

// Packed offsets: the host copy stands in for the device one (nothing reads it here).
cuda::DeviceOffsets offsets(const Case& c) { return {c.call.varlen() ? c.call.cu_seqlens.data() : nullptr, 0}; }

std::string refusal(const Case& c) {
  CallTensors t = make_call(c);
  return cuda::sm90::backward_refusal(cuda::setup_backward(c.call, t.backward(), offsets(c)));
}

cuda::BackwardChoice choice(const Case& c, const cuda::BackwardOptions& o = {}) {
  CallTensors t = make_call(c);
  return cuda::backward_path(c.call, t.backward(), offsets(c), o);
}

TEST(BackwardDispatch, Sm90TakesGatedDeltaNetAndDeltaNetBf16K128Dense) {
  const ScopedEnv env("GLR_BACKWARD_PATH", nullptr);
  for (Member m : {Member::gated_deltanet, Member::deltanet})
    for (const Shape& s : {kK128, Shape{"B3_T1_H2_no_states", 3, 1, 2, 2, 128, 128, {}, false},
                           Shape{"B2_T1000_H4", 2, 1000, 4, 4, 128, 128, {}, true}})
      for (DType gate : {DType::f32, DType::bf16}) {  // g, beta, dg, dbeta
        const Case c = make_case(m, s, {DType::bf16, gate}, {}, 7);
        EXPECT_EQ(refusal(c), "") << c.describe();
      }
}

// K = V = 64 (the kernels' kD = 64 instantiation): dense batches (T not a multiple of 64, with and without states),
// grouped value heads and packed sequences, both members, fp32 and bf16 g/beta. The benchmark's B16 T2048 H32 K=V=64
// row is one of them.
TEST(BackwardDispatch, Sm90TakesK64) {
  const ScopedEnv env("GLR_BACKWARD_PATH", nullptr);
  for (Member m : {Member::gated_deltanet, Member::deltanet})
    for (const Shape& s : {Shape{"K64_T130", 1, 130, 1, 1, 64, 64, {}, true},
                           Shape{"K64_B3_T1_H2_no_states", 3, 1, 2, 2, 64, 64, {}, false},
                           Shape{"K64_B2_T100_H2_HV8", 2, 100, 2, 8, 64, 64, {}, true},
                           Shape{"K64_varlen_HV2H", 1, 130, 1, 2, 64, 64, {0, 0, 1, 64, 130}, true}})
      for (DType gate : {DType::f32, DType::bf16}) {
        const Case c = make_case(m, s, {DType::bf16, gate}, {}, 7);
        EXPECT_EQ(refusal(c), "") << c.describe();
      }
}

// g and beta each fp32 or bf16, dg and dbeta in their dtypes (as setup_backward makes them); the Problem edited
// by hand for the combinations Dtypes cannot express (it sets g and beta together) and for those the API never
// produces (dg in another dtype than g: refused by name).
TEST(BackwardDispatch, Sm90GateAndBetaDtypes) {
  const Case c32 = make_case(Member::gated_deltanet, kK128, {DType::bf16, DType::f32}, {}, 11);
  const Case c16 = make_case(Member::gated_deltanet, kK128, {DType::bf16, DType::bf16}, {}, 11);
  CallTensors t32 = make_call(c32), t16 = make_call(c16);
  const cuda::Problem p32 = cuda::setup_backward(c32.call, t32.backward(), offsets(c32));
  const cuda::Problem p16 = cuda::setup_backward(c16.call, t16.backward(), offsets(c16));
  EXPECT_EQ(cuda::sm90::backward_refusal(p32), "");
  EXPECT_EQ(cuda::sm90::backward_refusal(p16), "");
  cuda::Problem p = p32;  // flash-linear-attention's: fp32 g, bf16 beta
  p.beta = p16.beta, p.dbeta = p16.dbeta;
  EXPECT_EQ(cuda::sm90::backward_refusal(p), "");
  p = p16;  // bf16 g, fp32 beta
  p.beta = p32.beta, p.dbeta = p32.dbeta;
  EXPECT_EQ(cuda::sm90::backward_refusal(p), "");
  p = p16;
  p.dg.dt = cuda::DType::f32;
  EXPECT_EQ(cuda::sm90::backward_refusal(p), "g bf16, dg fp32 (takes fp32 or bf16 g, dg in g's dtype)");
  p = p32;
  p.dbeta.dt = cuda::DType::bf16;
  EXPECT_EQ(cuda::sm90::backward_refusal(p), "beta fp32, dbeta bf16 (takes fp32 or bf16 beta, dbeta in beta's dtype)");
  p = p32;
  p.beta.dt = p.dbeta.dt = cuda::DType::f64;  // the emulator's wide dtypes
  EXPECT_EQ(cuda::sm90::backward_refusal(p), "beta fp64, dbeta fp64 (takes fp32 or bf16 beta, dbeta in beta's dtype)");
  p = p32;
  p.g.dt = p.dg.dt = cuda::DType::f16;
  EXPECT_EQ(cuda::sm90::backward_refusal(p), "g fp16, dg fp16 (takes fp32 or bf16 g, dg in g's dtype)");
}

// Grouped value heads (HV a multiple of H) on dense batches: value head hv reads q/k head hv / (HV / H), and a
// group kernel sums dq, dk over each group in a fixed order. Packed sequences: Sm90TakesPackedSequences.
TEST(BackwardDispatch, Sm90TakesGroupedValueHeadsDense) {
  const ScopedEnv env("GLR_BACKWARD_PATH", nullptr);
  for (Member m : {Member::gated_deltanet, Member::deltanet})
    for (const Shape& s : {Shape{"HV2H", 1, 130, 1, 2, 128, 128, {}, true},
                           Shape{"B2_T100_H2_HV8", 2, 100, 2, 8, 128, 128, {}, false}}) {
      const Case c = make_case(m, s, {DType::bf16}, {}, 7);
      EXPECT_EQ(refusal(c), "") << c.describe();
    }
}

// Packed sequences (cu_seqlens, B = 1): every length (0, 1, a chunk's 64 and around it), h0/dht per sequence or
// none, grouped value heads, both members, fp32 and bf16 g/beta; the backward indexes each sequence's chunks through
// the forward's chunk table (gdn_bwd_mma.cuh). Strided packed tensors are still refused by layout.
TEST(BackwardDispatch, Sm90TakesPackedSequences) {
  const ScopedEnv env("GLR_BACKWARD_PATH", nullptr);
  for (Member m : {Member::gated_deltanet, Member::deltanet})
    for (const Shape& s : {Shape{"varlen", 1, 130, 1, 1, 128, 128, {0, 64, 130}, true},
                           Shape{"varlen_HV2H", 1, 130, 1, 2, 128, 128, {0, 64, 130}, true},
                           Shape{"varlen_0_1_63_65_empty_last", 1, 129, 2, 4, 128, 128, {0, 0, 1, 64, 129, 129}, false},
                           Shape{"varlen_one_token", 1, 1, 1, 1, 128, 128, {0, 1}, true}})
      for (DType gate : {DType::f32, DType::bf16}) {
        const Case c = make_case(m, s, {DType::bf16, gate}, {}, 7);
        EXPECT_EQ(refusal(c), "") << c.describe();
      }
  const Case strided = make_case(Member::gated_deltanet, {"varlen", 1, 130, 1, 1, 128, 128, {0, 64, 130}, true},
                                 {DType::bf16}, {true, false}, 7);
  EXPECT_NE(refusal(strided).find("not dense"), std::string::npos) << refusal(strided);
}

// The members without the delta rule (Mamba2, RetNet, linear attention: the kernels' kDelta = false instantiation):
// dense batches with and without states, K = V = 128 and 64, grouped value heads, packed sequences, fp32 and bf16 g.
TEST(BackwardDispatch, Sm90TakesTheMembersWithoutTheDeltaRule) {
  const ScopedEnv env("GLR_BACKWARD_PATH", nullptr);
  for (Member m : {Member::mamba2, Member::retnet, Member::linear_attention})
    for (const Shape& s : {kK128, Shape{"B3_T1_H2_no_states", 3, 1, 2, 2, 128, 128, {}, false},
                           Shape{"K64_B2_T100_H2_HV8", 2, 100, 2, 8, 64, 64, {}, true},
                           Shape{"varlen_0_1_63_65_empty_last", 1, 129, 2, 4, 128, 128, {0, 0, 1, 64, 129, 129}, false},
                           Shape{"K64_varlen_HV2H", 1, 130, 1, 2, 64, 64, {0, 0, 1, 64, 130}, true}})
      for (DType gate : {DType::f32, DType::bf16}) {
        const Case c = make_case(m, s, {DType::bf16, gate}, {}, 7);
        EXPECT_EQ(refusal(c), "") << c.describe();  // (backward_path would now ask the device: gpu_test.cpp)
      }
  // the delta rule with a per-head gate is no member of the family: refused by name (the Problem edited by hand)
  const Case c = make_case(Member::retnet, kK128, {DType::bf16}, {}, 7);
  CallTensors t = make_call(c);
  cuda::Problem p = cuda::setup_backward(c.call, t.backward(), offsets(c));
  p.delta = 1;
  EXPECT_NE(cuda::sm90::backward_refusal(p).find("member: the delta rule with a per-head gate"), std::string::npos);
}

TEST(BackwardDispatch, RefusalsNameWhatRuledSm90Out) {
  const ScopedEnv env("GLR_BACKWARD_PATH", nullptr);
  struct Refused {
    Member member;
    Shape shape;
    Dtypes dt;
    Layout layout;
    const char* reason;
  };
  const Refused cases[] = {
      {Member::mamba2, {"K128_V64", 1, 130, 1, 1, 128, 64, {}, true}, {DType::bf16}, {}, "K = 128, V = 64"},
      {Member::retnet, kK128, {DType::f16}, {}, "q, k, v, dout, dq, dk, dv not all bf16"},
      {Member::linear_attention, kK128, {DType::bf16}, {true, false}, "not dense"},
      {Member::deltanet, {"K128_V64", 1, 130, 1, 1, 128, 64, {}, true}, {DType::bf16}, {}, "K = 128, V = 64 (takes K = V = 64 or 128)"},
      {Member::gated_deltanet, {"K64_V128", 1, 130, 1, 1, 64, 128, {}, true}, {DType::bf16}, {}, "K = 64, V = 128 (takes K = V = 64 or 128)"},
      {Member::gated_deltanet, kK128, {DType::f16}, {}, "q, k, v, dout, dq, dk, dv not all bf16"},
      {Member::gated_deltanet, kK128, {DType::bf16}, {true, false}, "not dense"},
      {Member::gated_deltanet, kK128, {DType::bf16}, {false, true}, "alignment"},
      {Member::gated_deltanet, {"K64_V128_varlen", 1, 130, 1, 1, 64, 128, {0, 64, 130}, true}, {DType::bf16}, {}, "K = 64, V = 128"},
  };
  for (const Refused& r : cases) {
    const Case c = make_case(r.member, r.shape, r.dt, r.layout, 8);
    const std::string why = refusal(c);
    std::printf("%-16s %-9s %-24s -> %s\n", member_name(r.member), r.shape.name.c_str(),
                (std::string(cuda::name_of(r.dt.x)) + "/" + cuda::name_of(r.dt.gate) + (r.layout.strided ? " strided" : "") +
                 (r.layout.offset ? " offset" : ""))
                    .c_str(),
                why.c_str());
    EXPECT_NE(why.find(r.reason), std::string::npos) << c.describe() << ": '" << why << "'";
    const cuda::BackwardChoice ch = choice(c);
    EXPECT_EQ(ch.path, cuda::BackwardPath::blocks) << c.describe();
    EXPECT_EQ(ch.reason, "sm90 backward not taken: " + why);
    EXPECT_EQ(ch.reason.find('\n'), std::string::npos);
  }
}

TEST(BackwardDispatch, OverridesForceTheBlockProgramsBeforeTheDeviceIsAsked) {
  const Case c = make_case(Member::gated_deltanet, kK128, {DType::bf16}, {}, 9);
  {
    const ScopedEnv env("GLR_BACKWARD_PATH", "blocks");
    const cuda::BackwardChoice ch = choice(c);
    EXPECT_EQ(ch.path, cuda::BackwardPath::blocks);
    EXPECT_EQ(ch.reason, "forced by GLR_BACKWARD_PATH=blocks");
  }
  {
    const ScopedEnv env("GLR_BACKWARD_PATH", nullptr);
    cuda::BackwardOptions o;
    o.force_blocks = true;
    const cuda::BackwardChoice ch = choice(c, o);
    EXPECT_EQ(ch.path, cuda::BackwardPath::blocks);
    EXPECT_EQ(ch.reason, "forced by BackwardOptions::force_blocks");
  }
  for (const char* bad : {"sm90", "fast", "Blocks"}) {
    const ScopedEnv env("GLR_BACKWARD_PATH", bad);
    try {
      choice(c);
      ADD_FAILURE() << "GLR_BACKWARD_PATH=" << bad << " was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(e.argument(), "GLR_BACKWARD_PATH");
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
  EXPECT_STREQ(cuda::name_of(cuda::BackwardPath::sm90), "sm90");
  EXPECT_STREQ(cuda::name_of(cuda::BackwardPath::blocks), "blocks");
}

TEST(BackwardDispatch, WorkspacePerPath) {
  // Sizes only: no tensors are drawn at this shape.
  const Params p = make_params(Member::gated_deltanet, 8, 4096, 16, 16, 128, 128, {}, true, true, kDefaultChunk);
  const std::size_t fast = cuda::backward_workspace_bytes(p, {}, cuda::BackwardPath::sm90);
  const std::size_t slow = cuda::backward_workspace_bytes(p, {}, cuda::BackwardPath::blocks);
  // gdn_bwd_mma.cuh: T (bf16 C x C per chunk), G, beta, Gr (fp32 per token), h (bf16 K x V per chunk), and the chunk
  // kernels' inputs only where they run (chunk_inputs_stored, gdn_bwd_mma.cuh: not where the fused sweep,
  // GLR_FUSED_BWD=1, takes the backward, which forms them itself): 8 dbeta slices (fp32 per token), dh' and dh''s bf16
  // residual (bf16 K x V per chunk), dX, V_new and its bf16 residual (bf16 per token each): 1298 MB here by default
  // (342 MB with GLR_FUSED_BWD=1), plus the 256-byte status header. The residuals (2026-12-04) keep dk within the
  // oracle gate's bound at small magnitudes.
  const bool fused = cuda::sm90::bwd_fused();
  const std::size_t scalars = fused ? 3 : 11, states = fused ? 1 : 3, vpieces = fused ? 0 : 3;
  const std::size_t bh = 8 * 16, tp = 4096, nt = 64;
  EXPECT_EQ(fast, 256 + bh * (nt * 64 * 64 * 2 + tp * 4 * scalars + nt * 128 * 128 * 2 * states + tp * 128 * 2 * vpieces));
  EXPECT_LT(fast * 2.5, slow);
  EXPECT_EQ(cuda::backward_workspace_bytes(p, {}), slow);
  std::printf("backward workspace at B8 T4096 H16 K=V=128: sm90 %.0f MB, blocks %.0f MB\n", fast / 1e6, slow / 1e6);
  // The members without the delta rule carve only what their kernels use: G, Gr, h, dh' and its residual (no T,
  // beta, V_new, its residual, dX, dbeta partials), RetNet also one fp32 dg share per chunk slot: 809.5 MB here.
  for (Member m : {Member::mamba2, Member::retnet, Member::linear_attention}) {
    const Params pm = make_params(m, 8, 4096, 16, 16, 128, 128, {}, true, true, kDefaultChunk);
    const std::size_t mfast = cuda::backward_workspace_bytes(pm, {}, cuda::BackwardPath::sm90);
    const std::size_t dg_shares = m == Member::retnet ? (bh * nt * 4 + 255) / 256 * 256 : 0;
    EXPECT_EQ(mfast, 256 + bh * (tp * 4 * 2 + nt * 128 * 128 * 2 * 3) + dg_shares) << name_of(m);
    std::printf("backward workspace at B8 T4096 H16 K=V=128, %s: sm90 %zu bytes (Gated DeltaNet %zu)\n", name_of(m),
                mfast, fast);
  }
  // Grouped value heads: everything per value head, and dq, dk of each value head in fp32 (B T HV K 4 bytes each)
  // for the group sums in fixed order, and one 4-byte arrival ticket a (chunk, q/k head) for the chunk kernels'
  // in-kernel sums (512 x 16 x 4 = 32 KB). The split rule (gdn_bwd_split_segments, 132 SMs on the emulated and the
  // H200's device; unset GLR_BACKWARD_SPLIT) splits this shape in 4 segments: Es and Ms, 3 x 32 fp32 (K, V) states
  // each (6.3 MB each): 3683 MB. The dh pass splits too (gdn_bwd_split_plan); with GLR_FUSED_BWD=1 the fused sweep
  // takes it over the segments (pass A' in its Es-only mode and the reverse combine, then the sweep:
  // launch_fused_bwd), so Es and Ms, dq and dk of each value head stay and the chunk kernels' inputs go (the tickets
  // too: the sweep leaves the group sums to group_kernel): 1770 MB.
  const Params g = make_params(Member::gated_deltanet, 1, 32768, 16, 32, 128, 128, {}, true, true, kDefaultChunk);
  const std::size_t gfast = cuda::backward_workspace_bytes(g, {}, cuda::BackwardPath::sm90);
  const std::size_t gbh = 32, gtp = 32768, gnt = 512;
  const std::size_t tickets = fused ? 0 : 1;
  EXPECT_EQ(gfast, 256 + gbh * (gnt * 64 * 64 * 2 + gtp * 4 * scalars + gnt * 128 * 128 * 2 * states + gtp * 128 * 2 * vpieces) +
                       2 * gbh * gtp * 128 * 4 + gnt * 16 * 4 * tickets + 2 * 3 * gbh * 128 * 128 * 4);
  std::printf("backward workspace at B1 T32768 H16 HV32 K=V=128: sm90 %.0f MB, blocks %.0f MB\n", gfast / 1e6,
              cuda::backward_workspace_bytes(g, {}, cuda::BackwardPath::blocks) / 1e6);
  // Packed sequences (the benchmark's varlen rows: mixed lengths summing to 32k, HV32): the per-chunk pieces for
  // ceil(T / 64) + N chunk slots per value head (each sequence adds at most one partial chunk), the per-token fp32
  // dq, dk of each value head, the tickets (one a chunk slot and q/k head), and the chunk table (int32: bad, total, N + 1 first chunks, one sequence per slot).
  std::vector<std::int64_t> cu = {0};
  for (std::int64_t len : {1, 63, 64, 65, 0, 4000, 7000, 9000, 12575}) cu.push_back(cu.back() + len);
  ASSERT_EQ(cu.back(), 32768);
  const Params v = make_params(Member::gated_deltanet, 1, 32768, 16, 32, 128, 128, cu, true, true, kDefaultChunk);
  const cuda::DeviceOffsets voff{v.cu_seqlens.data(), 0};  // the host copy stands in (sizes only: nothing reads it)
  const std::size_t vfast = cuda::backward_workspace_bytes(v, voff, cuda::BackwardPath::sm90);
  const std::size_t vN = cu.size() - 1, vslots = (512 + vN) * 32, vtable = (4 * (2 + vN + 1 + 512 + vN) + 255) / 256 * 256;
  // With the split by length (segments.cuh) the host sizes Es and Ms for its bound of split slots, which it takes
  // from T, N and the segment length alone (the lengths stay on the device): (512 + N) / 128 = 4 slots here, each
  // 32 fp32 (K, V) states, twice; and the device segment table (its prefix sums: one 256-byte piece here). With
  // GLR_FUSED_BWD=1 none of the chunk kernels' inputs, as above (split or not, the sweep takes it).
  EXPECT_EQ(vfast, 256 + vslots * (64 * 64 * 2 + 64 * 4 * scalars + 128 * 128 * 2 * states + 64 * 128 * 2 * vpieces) +
                       2 * 32 * std::size_t{32768} * 128 * 4 + ((512 + vN) * 16 * 4 + 255) / 256 * 256 * tickets + vtable +
                       2 * 4 * 32 * std::size_t{128} * 128 * 4 + 256);
  std::printf("backward workspace at varlen T32768 (N %zu) H16 HV32 K=V=128: sm90 %.0f MB, blocks %.0f MB\n", vN,
              vfast / 1e6, cuda::backward_workspace_bytes(v, voff, cuda::BackwardPath::blocks) / 1e6);
  // K = V = 64 (the benchmark's B16 T2048 H32 row): the K x V and per-token V pieces at the real dims, a quarter
  // and a half of K = 128's (V_new's pieces either way: the fused sweep takes K = V = 128 only).
  const Params k = make_params(Member::gated_deltanet, 16, 2048, 32, 32, 64, 64, {}, true, true, kDefaultChunk);
  const std::size_t kfast = cuda::backward_workspace_bytes(k, {}, cuda::BackwardPath::sm90);
  const std::size_t kbh = 16 * 32, ktp = 2048, knt = 32;
  EXPECT_EQ(kfast, 256 + kbh * (knt * 64 * 64 * 2 + ktp * 4 * 11 + knt * 64 * 64 * 2 * 3 + ktp * 64 * 2 * 3));
  std::printf("backward workspace at B16 T2048 H32 K=V=64: sm90 %.0f MB, blocks %.0f MB\n", kfast / 1e6,
              cuda::backward_workspace_bytes(k, {}, cuda::BackwardPath::blocks) / 1e6);
}

// The forward's saved intermediates (cuda::Saved): what the wy kernel forms at a cost and nothing else, T (bf16 C x C
// per chunk slot) with the delta rule and G (fp32 per chunk row), and packed sequences' chunk table, each piece
// rounded to 256 bytes (beta and Gr are formed again in the backward from beta and g): 69.2 MB = 66 MiB at B8 T4096
// H16 K = V = 128 and 132 MiB at B4 T8192 H32, FlashQLA's (its solve's matrix and the gates' cumulative sum, measured
// 66 and 132 MiB on an H100: results/glr/side-by-side-2026-12-07-h100); 2 MiB without the delta rule; the same
// whichever path the forward then takes. Asserted exactly, so the block cannot grow back unnoticed.
TEST(BackwardDispatch, SavedBytes) {
  const Params p = make_params(Member::gated_deltanet, 8, 4096, 16, 16, 128, 128, {}, true, true, kDefaultChunk);
  const std::size_t rows = std::size_t{8} * 16 * 4096;
  EXPECT_EQ(cuda::saved_bytes(p), rows * 64 * 2 + rows * 4);
  EXPECT_EQ(cuda::saved_bytes(p), std::size_t{66} << 20);
  const Params big = make_params(Member::gated_deltanet, 4, 8192, 32, 32, 128, 128, {}, true, true, kDefaultChunk);
  EXPECT_EQ(cuda::saved_bytes(big), std::size_t{132} << 20);
  const Params pm = make_params(Member::mamba2, 8, 4096, 16, 16, 128, 128, {}, true, true, kDefaultChunk);
  EXPECT_EQ(cuda::saved_bytes(pm), rows * 4);
  std::vector<std::int64_t> cu = {0};
  for (std::int64_t len : {1, 63, 64, 65, 0, 4000, 7000, 9000, 12575}) cu.push_back(cu.back() + len);
  const Params v = make_params(Member::gated_deltanet, 1, 32768, 16, 32, 128, 128, cu, true, true, kDefaultChunk);
  const cuda::DeviceOffsets voff{v.cu_seqlens.data(), 0};  // the host copy stands in (sizes only)
  const std::size_t vN = cu.size() - 1, vrows = (512 + vN) * 32 * 64, vtable = (4 * (2 + vN + 1 + 512 + vN) + 255) / 256 * 256;
  EXPECT_EQ(cuda::saved_bytes(v, voff), vrows * 64 * 2 + vrows * 4 + vtable);
  std::printf("saved intermediates at B8 T4096 H16 K=V=128: %.1f MB (mamba2 %.1f MB), sm90 backward workspace %.0f MB\n",
              cuda::saved_bytes(p) / 1e6, cuda::saved_bytes(pm) / 1e6,
              cuda::backward_workspace_bytes(p, {}, cuda::BackwardPath::sm90) / 1e6);
}

// The C entry point's glr_capi_backward_path (what bench/glr loads): the same choice, the reason in msg, a bad
// GLR_BACKWARD_PATH an error in msg. Dense tensors at fake 256-byte aligned addresses: nothing reads them.
TEST(BackwardDispatch, CApiBackwardPath) {
  alignas(256) static char arena[16][256];
  auto at = [&](int i) { return static_cast<void*>(arena[i]); };
  glr_capi_problem p{};
  p.B = 1, p.T = 130, p.H = 1, p.HV = 2, p.K = 64, p.V = 128;  // head dims the GPU takes, the sm90 backward not
  p.member = 0;  // gated_deltanet
  p.x_dtype = 2, p.gate_dtype = 0, p.beta_dtype = 0;
  p.initial_state = 1, p.final_state = 1;
  p.scale = 0.125;
  auto call = [&](std::int32_t* path, char* msg) {
    const bool delta = p.member <= 1;  // gated_deltanet, deltanet: beta and dbeta
    return glr_capi_backward_path(&p, at(0), at(1), at(2), at(3), delta ? at(4) : nullptr, at(5), at(6), at(7), at(8),
                                  at(9), at(10), at(11), delta ? at(12) : nullptr, at(13), path, msg, 256);
  };
  char msg[256];
  std::int32_t path = -1;
  {
    const ScopedEnv env("GLR_BACKWARD_PATH", nullptr);
    ASSERT_EQ(call(&path, msg), 0) << msg;
    EXPECT_EQ(path, 0);
    EXPECT_NE(std::string(msg).find("sm90 backward not taken: K = 64, V = 128 (takes K = V = 64 or 128)"),
              std::string::npos) << msg;
    // g and beta each fp32 or bf16 (flash-linear-attention's fp32 g with bf16 beta first): the dtypes pass, so the
    // reason is still the next check's (K != V: grouped value heads are taken).
    for (const auto& [gd, bd] : {std::pair{0, 2}, std::pair{2, 0}, std::pair{2, 2}}) {
      p.gate_dtype = gd, p.beta_dtype = bd;
      ASSERT_EQ(call(&path, msg), 0) << msg;
      EXPECT_EQ(path, 0);
      EXPECT_NE(std::string(msg).find("sm90 backward not taken: K = 64, V = 128"), std::string::npos) << msg;
    }
    p.gate_dtype = 0, p.beta_dtype = 0;
    p.HV = 1, p.K = 128, p.V = 64;
    p.member = 2;  // mamba2: no longer refused as a member (since 2026-12-04); the head dims are the reason
    ASSERT_EQ(call(&path, msg), 0) << msg;
    EXPECT_EQ(path, 0);
    EXPECT_NE(std::string(msg).find("sm90 backward not taken: K = 128, V = 64"), std::string::npos) << msg;
    EXPECT_EQ(std::string(msg).find("member"), std::string::npos) << msg;
    p.member = 0;
  }
  {
    const ScopedEnv env("GLR_BACKWARD_PATH", "blocks");
    path = -1;
    ASSERT_EQ(call(&path, msg), 0) << msg;
    EXPECT_EQ(path, 0);
    EXPECT_STREQ(msg, "forced by GLR_BACKWARD_PATH=blocks");
  }
  {
    const ScopedEnv env("GLR_BACKWARD_PATH", "tensor-cores");
    EXPECT_EQ(call(&path, msg), 1);
    EXPECT_NE(std::string(msg).find("GLR_BACKWARD_PATH"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace glr::cudatest
