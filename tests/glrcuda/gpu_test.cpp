// The CUDA kernels on a GPU (ctest label gpu; every test skips without a device):
//   * error against the float64 oracle, ||out - ref|| / ||ref|| per output, for every member, the shapes
//     of shapes.hpp, bf16 and fp16, a strided and offset-by-one layout, within the bounds derived in
//     shapes.hpp; printed as one table (the one docs/perf.md records);
//   * every output element written (outputs are poisoned with NaN bytes before each call);
//   * bitwise determinism: a second call with fresh allocations at other addresses gives the same bits;
//   * device-only offsets: same bits as with the host copy; invalid ones give NaN and the status word;
//   * the forward's dispatch (cuda::forward_path): bf16 K = V (64, 128) dense calls take the sm90 tensor-core
//     forward on an sm_90 device, everything else the block programs; both paths against the oracle (each
//     within its bound), against each other, deterministic; GLR_FORWARD_PATH=blocks forces the fallback;
//   * the backward's dispatch (cuda::backward_path): bf16 K = V (64, 128) calls of every member (the delta ones, and
//     since 2026-12-04 Mamba2, RetNet, linear attention) with
//     HV a multiple of H (g and beta fp32 or bf16), dense batches or packed sequences, take the sm90 tensor-core
//     backward on an sm_90 device; the same checks, T up to 4096, invalid packed offsets, the refusal reasons,
//     GLR_BACKWARD_PATH=blocks and BackwardOptions::force_blocks, the per-path workspace;
//   * the forward's saved intermediates (cuda::Saved): the backward from them bit for bit the recomputing one.
// When an output is off, the workspace comes back and each stage is diffed against its CPU chunked twin,
// so one log says which stage broke.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <cstring>
#include <future>
#include <string>
#include <vector>

#include "common/setup.hpp"
#include "common/workspace.hpp"
#include "device.hpp"
#include "glr/glr_cuda.hpp"
#include "kgate_call.hpp"
#include "scoped_env.hpp"
#include "shapes.hpp"

namespace glr::cudatest {
namespace {

class Gpu : public testing::Test {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
    cuda_ok(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
  }
  void TearDown() override {
    if (stream_) cudaStreamDestroy(stream_);
  }
  cudaStream_t stream_ = nullptr;
};

struct GpuRun {
  cuda::ForwardPath path = cuda::ForwardPath::blocks;  // the forward's path (forward runs only)
  cuda::BackwardPath bpath = cuda::BackwardPath::blocks;  // the backward's path (backward runs only)
  Results got;
  std::vector<double> bytes;      // raw output bytes
  std::vector<double> workspace;  // the workspace after the call (when asked for)
};

// What the workspace holds before a call: NaN bytes (an unwritten read becomes NaN), zeros, or random
// bytes (what a reused allocation holds). A correct pipeline gives the same bits after each.
enum class WsFill { nan_bytes, zero, random };

void fill_workspace(void* ws, std::size_t bytes, WsFill fill, cudaStream_t s, std::uint64_t seed = 1) {
  if (fill != WsFill::random) {
    cuda_ok(cudaMemsetAsync(ws, fill == WsFill::zero ? 0 : 0xff, bytes, s), "fill workspace");
    return;
  }
  // finite fp32 values of ordinary size (the emulator's fill), so a stray read changes bits without a NaN
  std::vector<char> host(bytes);
  cuda::fill_memory(host.data(), bytes, {cuda::EmuFill::random, seed}, sizeof(float));
  cuda_ok(cudaMemcpyAsync(ws, host.data(), bytes, cudaMemcpyHostToDevice, s), "fill workspace");
  cuda_ok(cudaStreamSynchronize(s), "fill workspace");
}

GpuRun run_gpu(const Case& c, bool backward, cudaStream_t s, bool keep_workspace, std::size_t spacer = 0,
               WsFill fill = WsFill::nan_bytes) {
  DeviceBuffer pad(spacer);  // shifts every later allocation: the determinism run sees other addresses
  DeviceCall call(c, s);
  const std::size_t bytes = backward ? cuda::backward_workspace_bytes(c.call, call.offsets)
                                     : cuda::forward_workspace_bytes(c.call, call.offsets);
  DeviceBuffer ws(bytes);
  fill_workspace(ws.ptr, bytes, fill, s);
  GpuRun r;
  if (!backward) r.path = cuda::forward_path(c.call, call.forward(), call.offsets).path;
  if (backward) r.bpath = cuda::backward_path(c.call, call.backward(), call.offsets).path;
  if (!backward)
    cuda::forward(c.call, call.forward(), call.offsets, ws.ptr, bytes, s);
  else
    cuda::backward(c.call, call.backward(), call.offsets, ws.ptr, bytes, s);
  cuda_ok(cudaGetLastError(), "after the call");
  cuda_ok(cudaStreamSynchronize(s), "running the call");
  call.download(backward, s);
  r.got = call.host.read(backward);
  r.bytes = call.output_bytes(backward);
  if (keep_workspace) {
    r.workspace.resize(bytes / sizeof(double) + 1);
    cuda_ok(cudaMemcpy(r.workspace.data(), ws.ptr, bytes, cudaMemcpyDeviceToHost), "workspace back");
  }
  return r;
}

// The stage table: the GPU workspace, laid out by the same plan, against the CPU chunked stages (the block
// programs' workspace: the sm90 kernels keep other intermediates, in bf16).
void print_stages(const Case& c, bool backward, std::vector<double>& workspace, bool sm90) {
  if (sm90) {
    std::printf("  stages of %s (%s): sm90 path, no block-program stages to diff (rerun with %s=blocks)\n",
                c.describe().c_str(), backward ? "backward" : "forward",
                backward ? "GLR_BACKWARD_PATH" : "GLR_FORWARD_PATH");
    return;
  }
  // The plan needs only the sizes, which the host copy of the offsets gives.
  const cuda::DeviceOffsets off{c.call.varlen() ? c.call.cu_seqlens.data() : nullptr, 0};
  const cuda::Problem p = cuda::setup_sizes(c.call, off, backward ? Pass::backward : Pass::forward);
  const cuda::WorkspacePlan<float> plan(p, backward, reinterpret_cast<char*>(workspace.data()));
  std::printf("  stages of %s (%s) against the CPU chunked twin (double):\n", c.describe().c_str(),
              backward ? "backward" : "forward");
  for (const StageError& e : stage_errors(c, plan.w, backward)) std::printf("    %-12s %10.3e\n", e.stage, e.err);
}

struct Row {
  std::string output, member, shape, dtype, path;
  double err, bound;
};

struct Planned {
  Case c;
  std::future<Results> fwd, bwd;
};

std::vector<Case> table_cases() {
  std::vector<Case> v;
  std::uint64_t salt = 100;
  for (Member m : kMembers)
    for (const Shape& s : gpu_shapes()) v.push_back(make_case(m, s, {DType::bf16}, {}, test_seed(salt++)));
  const std::vector<Shape> g = gpu_shapes();
  for (Member m : kMembers)
    for (const Shape& s : {g[0], g[2], g[5]})
      v.push_back(make_case(m, s, {DType::f16, DType::f16, DType::f32}, {}, test_seed(salt++)));
  for (Member m : {Member::gated_deltanet, Member::mamba2})
    v.push_back(make_case(m, g[2], {DType::bf16, DType::bf16, DType::f32}, {true, true}, test_seed(salt++)));
  return v;
}

std::string shape_label(const Case& c) {
  return c.shape.name + (c.layout.strided ? "+strided" : "") + (c.layout.offset ? "+offset" : "");
}

DType out_dtype(const Case& c, const std::string& name) {
  if (name == "ht" || name == "dh0") return c.dt.state;
  if (name == "dg" || name == "dbeta") return c.dt.gate;
  return c.dt.x;
}

TEST_F(Gpu, ErrorTableAgainstTheOracleAndDeterminism) {
  // The oracles run on every host core while the GPU works through the cases.
  std::vector<Planned> plan;
  for (Case& c : table_cases()) {
    Planned p{std::move(c), {}, {}};
    plan.push_back(std::move(p));
  }
  for (Planned& p : plan) {
    p.fwd = std::async(std::launch::async, [&c = p.c] { return oracle(c, false); });
    p.bwd = std::async(std::launch::async, [&c = p.c] { return oracle(c, true); });
  }
  std::vector<Row> rows;
  int nondeterministic = 0;
  for (Planned& p : plan) {
    const Case& c = p.c;
    for (bool backward : {false, true}) {
      GpuRun a = run_gpu(c, backward, stream_, true);
      const GpuRun b = run_gpu(c, backward, stream_, false, 1 << 20);
      const bool same = a.bytes.size() == b.bytes.size() &&
                        std::memcmp(a.bytes.data(), b.bytes.data(), a.bytes.size() * sizeof(double)) == 0;
      EXPECT_TRUE(same) << "two runs differ bitwise: " << c.describe() << (backward ? " backward" : " forward");
      nondeterministic += !same;
      const Results ref = backward ? p.bwd.get() : p.fwd.get();
      const std::vector<std::pair<const char*, std::pair<const std::vector<double>*, const std::vector<double>*>>>
          outs = backward ? decltype(outs){{"dq", {&a.got.dq, &ref.dq}},       {"dk", {&a.got.dk, &ref.dk}},
                                           {"dv", {&a.got.dv, &ref.dv}},       {"dg", {&a.got.dg, &ref.dg}},
                                           {"dbeta", {&a.got.dbeta, &ref.dbeta}}, {"dh0", {&a.got.dh0, &ref.dh0}}}
                          : decltype(outs){{"o", {&a.got.o, &ref.o}}, {"ht", {&a.got.ht, &ref.ht}}};
      bool bad = false;
      for (const auto& [name, pr] : outs) {
        if (pr.second->empty()) continue;
        const DType dt = out_dtype(c, name);
        const double err = rel_err(*pr.first, *pr.second);
        const double bound = backward ? error_bound(name, dt, a.bpath) : error_bound(name, dt, a.path);
        const char* path = backward ? cuda::name_of(a.bpath) : cuda::name_of(a.path);
        rows.push_back({name, member_name(c.member), shape_label(c), cuda::name_of(dt), path, err, bound});
        const bool ok = err <= bound;
        EXPECT_TRUE(ok) << name << " error " << err << " > bound " << bound << ": " << c.describe();
        bad |= !ok;
      }
      if (bad)
        print_stages(c, backward, a.workspace,
                     backward ? a.bpath == cuda::BackwardPath::sm90 : a.path == cuda::ForwardPath::sm90);
    }
  }
  std::printf("\n| output | member | shape | dtype | rel. error | bound | | path |\n|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows)
    std::printf("| %s | %s | %s | %s | %.3e | %.3e | %s | %s |\n", r.output.c_str(), r.member.c_str(), r.shape.c_str(),
                r.dtype.c_str(), r.err, r.bound, r.err <= r.bound ? "ok" : "FAIL", r.path.c_str());
  std::printf("\nbitwise determinism: %d of %zu calls differed between two runs\n", nondeterministic, 2 * plan.size());
}

// One case per member with the full per-stage table, even when everything passes (the diagnosis a
// failing run would print, and a record of how close each GPU stage is to its CPU twin).
TEST_F(Gpu, StageTable) {
  const ScopedEnv blocks("GLR_FORWARD_PATH", "blocks");  // the stages exist on the block programs only
  const ScopedEnv bblocks("GLR_BACKWARD_PATH", "blocks");
  for (Member m : kMembers) {
    const Case c = make_case(m, gpu_shapes()[2], {DType::bf16}, {}, test_seed(900));
    for (bool backward : {false, true}) {
      GpuRun a = run_gpu(c, backward, stream_, true);
      print_stages(c, backward, a.workspace, false);
    }
  }
}

TEST_F(Gpu, DeviceOnlyOffsets) {
  const Shape s = gpu_shapes()[2];
  const Case c = make_case(Member::gated_deltanet, s, {DType::bf16}, {}, test_seed(901));
  Params device_only = c.call;
  device_only.cu_seqlens.clear();
  for (bool backward : {false, true}) {
    const GpuRun ref = run_gpu(c, backward, stream_, false);
    for (bool valid : {true, false}) {
      DeviceCall call(c, stream_);
      std::vector<std::int64_t> cu = s.cu_seqlens;
      if (!valid) cu[2] = cu[1] - 1;  // decreasing
      DeviceBuffer dcu(cu.size() * sizeof(std::int64_t));
      cuda_ok(cudaMemcpy(dcu.ptr, cu.data(), cu.size() * sizeof(std::int64_t), cudaMemcpyHostToDevice), "cu");
      const cuda::DeviceOffsets off{static_cast<const std::int64_t*>(dcu.ptr), static_cast<std::int64_t>(cu.size()) - 1};
      const std::size_t bytes = backward ? cuda::backward_workspace_bytes(device_only, off)
                                         : cuda::forward_workspace_bytes(device_only, off);
      DeviceBuffer ws(bytes);
      if (!backward)
        cuda::forward(device_only, call.forward(), off, ws.ptr, bytes, stream_);
      else
        cuda::backward(device_only, call.backward(), off, ws.ptr, bytes, stream_);
      const std::int32_t status = cuda::workspace_status(ws.ptr, stream_);
      call.download(backward, stream_);
      const Results r = call.host.read(backward);
      if (valid) {
        EXPECT_EQ(status, cuda::kStatusOk);
        EXPECT_EQ(diff_results(r, ref.got), "") << "device-only offsets changed the result";
      } else {
        EXPECT_EQ(status, cuda::kStatusBadOffsets);
        for (const auto* out : {&r.o, &r.ht, &r.dq, &r.dk, &r.dv, &r.dg, &r.dbeta, &r.dh0})
          for (double x : *out) ASSERT_TRUE(std::isnan(x)) << "an output was not poisoned";
      }
    }
  }
}

// The bits do not depend on what the workspace held before the call: NaN bytes, zeros, random values.
TEST_F(Gpu, ResultsIndependentOfTheWorkspaceFill) {
  const std::vector<Shape> g = gpu_shapes();
  std::uint64_t salt = 950;
  for (Member m : kMembers)
    for (const Shape& s : {g[0], g[2], g[4]})
      for (Layout l : {Layout{}, Layout{true, true}}) {
        const Case c = make_case(m, s, {DType::bf16}, l, test_seed(salt++));
        for (bool backward : {false, true}) {
          const GpuRun ref = run_gpu(c, backward, stream_, false);
          for (WsFill f : {WsFill::zero, WsFill::random}) {
            const GpuRun r = run_gpu(c, backward, stream_, false, 0, f);
            EXPECT_EQ(diff_results(r.got, ref.got), "")
                << (f == WsFill::zero ? "zero" : "random") << " workspace vs NaN bytes: " << c.describe()
                << (backward ? " backward" : " forward");
          }
        }
      }
}

// Whether the current device is sm_90 (where the sm90 forward runs).
bool on_sm90() {
  int dev = 0, major = 0, minor = 0;
  cuda_ok(cudaGetDevice(&dev), "device");
  cuda_ok(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), "cc");
  cuda_ok(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev), "cc");
  return major == 9 && minor == 0;
}

cuda::ForwardChoice path_of(const Case& c, cudaStream_t s) {
  DeviceCall call(c, s);
  return cuda::forward_path(c.call, call.forward(), call.offsets);
}

// The forward's dispatch: which calls take the sm90 tensor-core forward (every member, grouped value heads,
// packed sequences, with and without states), which fall back and why; on both paths the outputs against the
// oracle within each path's bound, the two paths within the sum of their bounds, and the sm90 path
// deterministic and independent of the workspace's previous contents.
TEST_F(Gpu, ForwardDispatchSm90AndFallback) {
  const bool sm90 = on_sm90();
  const std::vector<Shape> fast_shapes = {
      {"K128_T130_states", 1, 130, 1, 1, 128, 128, {}, true},
      {"K128_B2_T1000_HV4H2", 2, 1000, 2, 4, 128, 128, {}, true},
      {"K128_varlen_HV2", 1, 700, 1, 2, 128, 128, {0, 1, 64, 64, 129, 700}, true},
      {"K128_T1_no_states", 3, 1, 1, 1, 128, 128, {}, false},
      {"K64_T300_HV2_states", 2, 300, 1, 2, 64, 64, {}, true},
      {"K64_varlen", 1, 333, 1, 1, 64, 64, {0, 65, 65, 200, 333}, true},
  };
  std::uint64_t salt = 1200;
  int fast = 0;
  for (Member m : kMembers)
    for (const Shape& sh : fast_shapes) {
      const Case c = make_case(m, sh, {DType::bf16}, {}, test_seed(salt++));
      const cuda::ForwardChoice choice = path_of(c, stream_);
      std::printf("forward path %-6s %s: %s\n", cuda::name_of(choice.path), c.describe().c_str(), choice.reason.c_str());
      EXPECT_EQ(choice.path, sm90 ? cuda::ForwardPath::sm90 : cuda::ForwardPath::blocks) << choice.reason;
      const Results ref = oracle(c, false);
      const GpuRun a = run_gpu(c, false, stream_, false);
      const GpuRun b = run_gpu(c, false, stream_, false, 1 << 20, WsFill::random);
      EXPECT_EQ(a.path, choice.path);
      EXPECT_EQ(diff_results(a.got, b.got), "") << "not deterministic / depends on the workspace: " << c.describe();
      GpuRun blocks;
      {
        const ScopedEnv force("GLR_FORWARD_PATH", "blocks");
        EXPECT_EQ(path_of(c, stream_).path, cuda::ForwardPath::blocks);
        blocks = run_gpu(c, false, stream_, false);
      }
      EXPECT_EQ(blocks.path, cuda::ForwardPath::blocks);
      for (const char* name : {"o", "ht"}) {
        const std::vector<double>& got = name[0] == 'o' ? a.got.o : a.got.ht;
        const std::vector<double>& fb = name[0] == 'o' ? blocks.got.o : blocks.got.ht;
        const std::vector<double>& r = name[0] == 'o' ? ref.o : ref.ht;
        if (r.empty()) continue;
        const DType dt = name[0] == 'o' ? DType::bf16 : DType::f32;
        const double e_fast = rel_err(got, r), e_blocks = rel_err(fb, r), e_pair = rel_err(got, fb);
        const double b_fast = error_bound(name, dt, a.path), b_blocks = error_bound(name, dt);
        std::printf("  %-2s %s err %.3e (bound %.3e), blocks err %.3e (bound %.3e), %s vs blocks %.3e\n", name,
                    cuda::name_of(a.path), e_fast, b_fast, e_blocks, b_blocks, cuda::name_of(a.path), e_pair);
        EXPECT_LE(e_fast, b_fast) << name << " " << c.describe();
        EXPECT_LE(e_blocks, b_blocks) << name << " " << c.describe();
        EXPECT_LE(e_pair, b_fast + b_blocks) << name << " " << c.describe();
      }
      fast += a.path == cuda::ForwardPath::sm90;
    }
  std::printf("forward dispatch: %d of %zu calls took the sm90 path (device %s sm_90)\n", fast,
              std::size(kMembers) * fast_shapes.size(), sm90 ? "is" : "is not");

  // Calls the sm90 forward does not take: each falls back, with a reason naming what ruled it out.
  struct Fallback {
    Shape shape;
    Dtypes dt;
    Layout layout;
    const char* reason;  // a substring of the reason
  };
  const std::vector<Fallback> fallbacks = {
      {{"K128_V64", 1, 130, 1, 1, 128, 64, {}, true}, {DType::bf16}, {}, "V = 64"},
      {{"K64_V128", 1, 130, 1, 1, 64, 128, {}, true}, {DType::bf16}, {}, "K = 64"},
      {{"K128_f16", 1, 130, 1, 1, 128, 128, {}, true}, {DType::f16}, {}, "bf16"},
      {{"K128_strided", 1, 130, 1, 1, 128, 128, {}, true}, {DType::bf16}, {true, false}, "dense"},
      {{"K128_offset", 1, 130, 1, 1, 128, 128, {}, true}, {DType::bf16}, {false, true}, ""},
  };
  for (const Fallback& f : fallbacks) {
    const Case c = make_case(Member::gated_deltanet, f.shape, f.dt, f.layout, test_seed(salt++));
    const cuda::ForwardChoice choice = path_of(c, stream_);
    std::printf("forward path %-6s %s: %s\n", cuda::name_of(choice.path), c.describe().c_str(), choice.reason.c_str());
    EXPECT_EQ(choice.path, cuda::ForwardPath::blocks) << c.describe();
    if (sm90) {
      EXPECT_NE(choice.reason.find(f.reason), std::string::npos) << choice.reason;
    }
  }

  // The override: "blocks" forces the fallback, "auto" is the default, anything else is refused by name.
  const Case c = make_case(Member::gated_deltanet, fast_shapes[0], {DType::bf16}, {}, test_seed(salt++));
  {
    const ScopedEnv force("GLR_FORWARD_PATH", "blocks");
    const cuda::ForwardChoice choice = path_of(c, stream_);
    EXPECT_EQ(choice.path, cuda::ForwardPath::blocks);
    EXPECT_NE(choice.reason.find("GLR_FORWARD_PATH"), std::string::npos) << choice.reason;
  }
  {
    const ScopedEnv aut("GLR_FORWARD_PATH", "auto");
    EXPECT_EQ(path_of(c, stream_).path, sm90 ? cuda::ForwardPath::sm90 : cuda::ForwardPath::blocks);
  }
  {
    const ScopedEnv bogus("GLR_FORWARD_PATH", "fast");
    try {
      path_of(c, stream_);
      ADD_FAILURE() << "GLR_FORWARD_PATH=fast was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(e.argument(), "GLR_FORWARD_PATH");
    }
  }
}

// The sm90 forward's workspace is smaller than the block programs' and enough for it; the two-argument
// query covers either path.
TEST_F(Gpu, ForwardWorkspaceSizesPerPath) {
  const Case c = make_case(Member::gated_deltanet, {"K128_T600", 2, 600, 1, 2, 128, 128, {}, true}, {DType::bf16}, {},
                           test_seed(1300));
  const std::size_t fast = cuda::forward_workspace_bytes(c.call, {}, cuda::ForwardPath::sm90);
  const std::size_t slow = cuda::forward_workspace_bytes(c.call, {}, cuda::ForwardPath::blocks);
  const std::size_t any = cuda::forward_workspace_bytes(c.call, {});
  std::printf("forward workspace at %s: sm90 %zu B, blocks %zu B\n", c.describe().c_str(), fast, slow);
  EXPECT_LT(fast, slow);
  EXPECT_EQ(any, std::max(fast, slow));
  // Exactly the sm90 size suffices for a call that takes the sm90 path.
  if (path_of(c, stream_).path == cuda::ForwardPath::sm90) {
    DeviceCall call(c, stream_);
    DeviceBuffer ws(fast);
    cuda::forward(c.call, call.forward(), call.offsets, ws.ptr, fast, stream_);
    cuda_ok(cudaStreamSynchronize(stream_), "forward with the sm90 workspace");
    EXPECT_EQ(cuda::workspace_status(ws.ptr, stream_), cuda::kStatusOk);
    call.download(false, stream_);
    EXPECT_EQ(diff_results(call.host.read(false), run_gpu(c, false, stream_, false).got), "");
  }
}

// The entry point that allocates its own workspace on the stream gives the same bits.
TEST_F(Gpu, StreamOrderedWorkspace) {
  const Case c = make_case(Member::retnet, gpu_shapes()[0], {DType::bf16}, {}, test_seed(902));
  const GpuRun ref = run_gpu(c, true, stream_, false);
  DeviceCall call(c, stream_);
  cuda::backward(c.call, call.backward(), call.offsets, stream_);
  call.download(true, stream_);
  EXPECT_EQ(diff_results(call.host.read(true), ref.got), "");
}

// The kgate entry libraries (what `kgate verify` loads) give the bits of the C++ API.
TEST_F(Gpu, KgateEntryPointsMatchTheApi) {
  for (const char* lib : {"glr_cuda_kgate_fwd.so", "glr_cuda_kgate_bwd.so"}) {
    const bool backward = std::string(lib).find("bwd") != std::string::npos;
    const std::string path = find_library(lib);
    if (path.empty()) GTEST_SKIP() << lib << " not found (set GLRCUDA_LIB_DIR)";
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(h, nullptr) << dlerror();
    auto version = reinterpret_cast<kgate_abi_version_fn>(dlsym(h, "kgate_abi_version"));
    auto device = reinterpret_cast<kgate_device_fn>(dlsym(h, "kgate_device"));
    auto run = reinterpret_cast<kgate_entry_fn>(dlsym(h, "kgate_run"));
    ASSERT_TRUE(version && device && run) << path;
    EXPECT_EQ(version(), KGATE_ABI_VERSION);
    EXPECT_EQ(device(), kDLCUDA);
    for (Member m : {Member::gated_deltanet, Member::retnet, Member::linear_attention})
      for (const Shape& s : {gpu_shapes()[0], gpu_shapes()[2]}) {
        const Case c = make_case(m, s, {DType::bf16}, {true, true}, test_seed(903));
        const GpuRun ref = run_gpu(c, backward, stream_, false);
        DeviceCall d(c, stream_);
        KgateCall kc(c, d, backward);
        kgate_call call = kc.call(stream_);
        EXPECT_EQ(run(&call), KGATE_OK) << kc.message();
        d.download(backward, stream_);
        EXPECT_EQ(diff_results(d.host.read(backward), ref.got), "") << lib << " " << c.describe();
      }
    // Dense bf16 K = V = 128: kgate_run is the API's dispatch (the sm90 forward, and for Gated DeltaNet the sm90
    // backward, on sm_90), kgate_run_blocks the block programs (what the cuda contracts judge).
    auto run_blocks = reinterpret_cast<kgate_entry_fn>(dlsym(h, "kgate_run_blocks"));
    ASSERT_TRUE(run_blocks) << path << ": no kgate_run_blocks";
    for (Member m : {Member::gated_deltanet, Member::mamba2}) {
      const Case c = make_case(m, gpu_shapes()[4], {DType::bf16}, {}, test_seed(904));
      for (bool blocks : {false, true}) {
        GpuRun ref;
        {
          const ScopedEnv env("GLR_FORWARD_PATH", blocks ? "blocks" : nullptr);
          const ScopedEnv benv("GLR_BACKWARD_PATH", blocks ? "blocks" : nullptr);
          ref = run_gpu(c, backward, stream_, false);
        }
        DeviceCall d(c, stream_);
        KgateCall kc(c, d, backward);
        kgate_call call = kc.call(stream_);
        EXPECT_EQ((blocks ? run_blocks : run)(&call), KGATE_OK) << kc.message();
        d.download(backward, stream_);
        EXPECT_EQ(diff_results(d.host.read(backward), ref.got), "")
            << lib << (blocks ? ":kgate_run_blocks " : ":kgate_run ") << c.describe();
      }
    }
    dlclose(h);
  }
}

cuda::BackwardChoice bpath_of(const Case& c, cudaStream_t s, const cuda::BackwardOptions& options = {}) {
  DeviceCall call(c, s);
  return cuda::backward_path(c.call, call.backward(), call.offsets, options);
}

// The backward's dispatch: Gated DeltaNet and DeltaNet (g = 0), and since 2026-12-04 Mamba2, RetNet (dg per value
// head) and linear attention (the kernels' kDelta = false), bf16 K = V = 128 or 64 calls with HV a multiple of H, dense
// batches and packed sequences (lengths 0, 1, 63, 64, 65 and long ones; h0/dht per sequence), take the sm90
// tensor-core backward on an sm_90 device (with and without states, T = 1 to 4096; g, beta, dg, dbeta fp32,
// and bf16 at two shapes and a packed one: the sm90 backward takes either since 2026-12-04); every gradient against
// the float64 oracle within its path's bound, the two paths within the sum of their bounds, the sm90 path bitwise
// deterministic and independent of the workspace's previous contents. Then the calls it refuses, each with its
// reason, and the overrides.
TEST_F(Gpu, BackwardDispatchSm90AndFallback) {
  const bool sm90 = on_sm90();
  const std::vector<Shape> fast_shapes = {
      {"K128_T130_states", 1, 130, 1, 1, 128, 128, {}, true},
      {"K128_B2_T1000_H2", 2, 1000, 2, 2, 128, 128, {}, true},
      {"K128_B3_T1_no_states", 3, 1, 1, 1, 128, 128, {}, false},
      {"K128_T4096_H4_states", 1, 4096, 4, 4, 128, 128, {}, true},
      {"K128_B2_T1000_H2_HV4_states", 2, 1000, 2, 4, 128, 128, {}, true},  // grouped value heads (HV = 2H)
      {"K128_T300_H1_HV4_no_states", 1, 300, 1, 4, 128, 128, {}, false},   // HV = 4H
  };
  std::vector<Case> cases;
  std::uint64_t salt = 1400;
  for (Member m : {Member::gated_deltanet, Member::deltanet})
    for (const Shape& sh : fast_shapes) cases.push_back(make_case(m, sh, {DType::bf16}, {}, test_seed(salt++)));
  // bf16 g, beta, dg, dbeta (Dtypes::gate sets all four; the emulator check tests/glr_sm90/emu_bwd_check.cpp and
  // glrcuda_dispatch_tests cover g and beta in different dtypes). Their own seeds: the cases below keep theirs.
  std::uint64_t salt_bf16 = 1450;
  for (Member m : {Member::gated_deltanet, Member::deltanet})
    for (const Shape* sh : {&fast_shapes[0], &fast_shapes[1]})
      cases.push_back(make_case(m, *sh, {DType::bf16, DType::bf16}, {}, test_seed(salt_bf16++)));
  // Packed sequences (cu_seqlens, B = 1; since 2026-12-04 on the tensor cores: each sequence's chunks through the
  // forward's chunk table): empty, single-token, chunk-boundary and long sequences, odd totals, states per sequence or
  // none, grouped value heads, bf16 g and beta on one. Their own seeds (1470 on).
  const std::vector<Shape> packed_shapes = {
      {"K128_varlen_states", 1, 700, 1, 1, 128, 128, {0, 1, 64, 64, 129, 700}, true},           // 1, 63, 0, 65, 571
      {"K128_varlen_H2_HV4_no_states", 1, 515, 2, 4, 128, 128, {0, 64, 128, 515, 515}, false},  // 64, 64, 387, 0
      {"K128_varlen_HV2_states", 1, 2049, 1, 2, 128, 128, {0, 0, 1000, 1001, 2049}, true},      // 0, 1000, 1, 1048
  };
  std::uint64_t salt_packed = 1470;
  for (Member m : {Member::gated_deltanet, Member::deltanet})
    for (const Shape& sh : packed_shapes) cases.push_back(make_case(m, sh, {DType::bf16}, {}, test_seed(salt_packed++)));
  cases.push_back(make_case(Member::gated_deltanet, packed_shapes[2], {DType::bf16, DType::bf16}, {},
                            test_seed(salt_packed++)));
  // K = V = 64 (the kernels' kD = 64 instantiation; the benchmark's B16 T2048 H32 K=V=64 row): dense with states and
  // T not a multiple of 64, grouped value heads, packed sequences, bf16 g and beta on one. Their own seeds (1490 on).
  const std::vector<Shape> k64_shapes = {
      {"K64_T130_states", 1, 130, 1, 1, 64, 64, {}, true},
      {"K64_B2_T1000_H2_HV4_states", 2, 1000, 2, 4, 64, 64, {}, true},
      {"K64_B3_T1_no_states", 3, 1, 1, 1, 64, 64, {}, false},
      {"K64_varlen_HV2_states", 1, 700, 1, 2, 64, 64, {0, 1, 64, 64, 129, 700}, true},
  };
  std::uint64_t salt_k64 = 1490;
  for (Member m : {Member::gated_deltanet, Member::deltanet})
    for (const Shape& sh : k64_shapes) cases.push_back(make_case(m, sh, {DType::bf16}, {}, test_seed(salt_k64++)));
  cases.push_back(make_case(Member::gated_deltanet, k64_shapes[0], {DType::bf16, DType::bf16}, {}, test_seed(salt_k64++)));
  // The members without the delta rule (since 2026-12-04 on the tensor cores, the kernels' kDelta = false
  // instantiation): Mamba2 (g per token), RetNet (one g per value head, dg summed over every token), linear attention
  // (no g): dense with states, B2 T1000, grouped value heads, packed sequences, K = V = 64, bf16 g on one. Their own
  // seeds (1510 on).
  std::uint64_t salt_members = 1510;
  for (Member m : {Member::mamba2, Member::retnet, Member::linear_attention}) {
    for (const Shape* sh : {&fast_shapes[0], &fast_shapes[1], &fast_shapes[4], &packed_shapes[2], &k64_shapes[1]})
      cases.push_back(make_case(m, *sh, {DType::bf16}, {}, test_seed(salt_members++)));
    if (m != Member::linear_attention)
      cases.push_back(make_case(m, fast_shapes[0], {DType::bf16, DType::bf16}, {}, test_seed(salt_members++)));
  }
  std::vector<std::future<Results>> refs;
  for (const Case& c : cases) refs.push_back(std::async(std::launch::async, [&c] { return oracle(c, true); }));
  int fast = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const cuda::BackwardChoice choice = bpath_of(c, stream_);
    std::printf("backward path %-6s %s: %s\n", cuda::name_of(choice.path), c.describe().c_str(), choice.reason.c_str());
    EXPECT_EQ(choice.path, sm90 ? cuda::BackwardPath::sm90 : cuda::BackwardPath::blocks) << choice.reason;
    {
      const ScopedEnv fwd("GLR_FORWARD_PATH", "blocks");  // the forward's override leaves the backward alone
      EXPECT_EQ(bpath_of(c, stream_).path, choice.path);
    }
    const GpuRun a = run_gpu(c, true, stream_, false);
    const GpuRun b = run_gpu(c, true, stream_, false, 1 << 20, WsFill::random);
    EXPECT_EQ(a.bpath, choice.path);
    EXPECT_EQ(diff_results(a.got, b.got), "") << "not deterministic / depends on the workspace: " << c.describe();
    GpuRun blocks;
    {
      const ScopedEnv force("GLR_BACKWARD_PATH", "blocks");
      EXPECT_EQ(bpath_of(c, stream_).path, cuda::BackwardPath::blocks);
      blocks = run_gpu(c, true, stream_, false);
    }
    EXPECT_EQ(blocks.bpath, cuda::BackwardPath::blocks);
    const Results ref = refs[i].get();
    if (c.member == Member::deltanet || c.member == Member::linear_attention) {
      EXPECT_TRUE(a.got.dg.empty() && ref.dg.empty());
    }
    if (c.member == Member::mamba2 || c.member == Member::retnet || c.member == Member::linear_attention) {
      EXPECT_TRUE(a.got.dbeta.empty() && ref.dbeta.empty());
    }
    const std::pair<const char*, const std::vector<double> Results::*> outs[] = {
        {"dq", &Results::dq}, {"dk", &Results::dk},       {"dv", &Results::dv},
        {"dg", &Results::dg}, {"dbeta", &Results::dbeta}, {"dh0", &Results::dh0}};
    for (const auto& [name, field] : outs) {
      const std::vector<double>& r = ref.*field;
      if (r.empty()) continue;
      const DType dt = out_dtype(c, name);
      const double e_fast = rel_err(a.got.*field, r), e_blocks = rel_err(blocks.got.*field, r);
      const double e_pair = rel_err(a.got.*field, blocks.got.*field);
      const double b_fast = error_bound(name, dt, a.bpath), b_blocks = error_bound(name, dt, cuda::BackwardPath::blocks);
      std::printf("  %-5s %s err %.3e (bound %.3e, %.2f of it), blocks err %.3e (bound %.3e), %s vs blocks %.3e\n", name,
                  cuda::name_of(a.bpath), e_fast, b_fast, e_fast / b_fast, e_blocks, b_blocks, cuda::name_of(a.bpath),
                  e_pair);
      EXPECT_LE(e_fast, b_fast) << name << " " << c.describe();
      EXPECT_LE(e_blocks, b_blocks) << name << " " << c.describe();
      EXPECT_LE(e_pair, b_fast + b_blocks) << name << " " << c.describe();
    }
    fast += a.bpath == cuda::BackwardPath::sm90;
  }
  std::printf("backward dispatch: %d of %zu calls took the sm90 path (device %s sm_90)\n", fast, cases.size(),
              sm90 ? "is" : "is not");

  // Calls the sm90 backward does not take: each falls back, with a reason naming what ruled it out (the reasons
  // come before the device is looked at, so they are the same on any device).
  struct Fallback {
    Member member;
    Shape shape;
    Dtypes dt;
    Layout layout;
    const char* reason;  // a substring of the reason
  };
  const Shape k128{"K128_T130", 1, 130, 1, 1, 128, 128, {}, true};
  const std::vector<Fallback> fallbacks = {
      {Member::mamba2, {"K64_V128", 1, 130, 1, 1, 64, 128, {}, true}, {DType::bf16}, {}, "K = 64, V = 128"},
      {Member::retnet, k128, {DType::f16}, {}, "bf16"},
      {Member::gated_deltanet, {"K64_V128", 1, 130, 1, 1, 64, 128, {}, true}, {DType::bf16}, {}, "K = 64, V = 128 (takes K = V = 64 or 128)"},
      {Member::gated_deltanet, {"K128_V64", 1, 130, 1, 1, 128, 64, {}, true}, {DType::bf16}, {}, "V = 64"},
      {Member::gated_deltanet, k128, {DType::f16}, {}, "bf16"},
      {Member::gated_deltanet, k128, {DType::bf16}, {true, false}, "dense"},
      {Member::gated_deltanet, k128, {DType::bf16}, {false, true}, "alignment"},
      {Member::gated_deltanet, {"K64_V128_varlen", 1, 130, 1, 1, 64, 128, {0, 64, 130}, true}, {DType::bf16}, {}, "K = 64, V = 128"},
  };
  for (const Fallback& f : fallbacks) {
    const Case c = make_case(f.member, f.shape, f.dt, f.layout, test_seed(salt++));
    const cuda::BackwardChoice choice = bpath_of(c, stream_);
    std::printf("backward path %-6s %s: %s\n", cuda::name_of(choice.path), c.describe().c_str(), choice.reason.c_str());
    EXPECT_EQ(choice.path, cuda::BackwardPath::blocks) << c.describe();
    EXPECT_NE(choice.reason.find("sm90 backward not taken: "), std::string::npos) << choice.reason;
    EXPECT_NE(choice.reason.find(f.reason), std::string::npos) << choice.reason;
  }

  // The overrides: GLR_BACKWARD_PATH=blocks and BackwardOptions::force_blocks force the fallback (the same bits as
  // each other), "auto" is the default, anything else is refused by name.
  const Case c = make_case(Member::gated_deltanet, fast_shapes[0], {DType::bf16}, {}, test_seed(salt++));
  GpuRun by_env;
  {
    const ScopedEnv force("GLR_BACKWARD_PATH", "blocks");
    const cuda::BackwardChoice choice = bpath_of(c, stream_);
    EXPECT_EQ(choice.path, cuda::BackwardPath::blocks);
    EXPECT_NE(choice.reason.find("GLR_BACKWARD_PATH"), std::string::npos) << choice.reason;
    by_env = run_gpu(c, true, stream_, false);
  }
  {
    cuda::BackwardOptions o;
    o.force_blocks = true;
    const cuda::BackwardChoice choice = bpath_of(c, stream_, o);
    EXPECT_EQ(choice.path, cuda::BackwardPath::blocks);
    EXPECT_NE(choice.reason.find("force_blocks"), std::string::npos) << choice.reason;
    DeviceCall call(c, stream_);
    cuda::backward(c.call, call.backward(), call.offsets, stream_, o);
    call.download(true, stream_);
    EXPECT_EQ(diff_results(call.host.read(true), by_env.got), "") << "force_blocks vs GLR_BACKWARD_PATH=blocks";
  }
  {
    const ScopedEnv aut("GLR_BACKWARD_PATH", "auto");
    EXPECT_EQ(bpath_of(c, stream_).path, sm90 ? cuda::BackwardPath::sm90 : cuda::BackwardPath::blocks);
  }
  {
    const ScopedEnv bogus("GLR_BACKWARD_PATH", "fast");
    try {
      bpath_of(c, stream_);
      ADD_FAILURE() << "GLR_BACKWARD_PATH=fast was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(e.argument(), "GLR_BACKWARD_PATH");
    }
  }
}

// The forward's saved intermediates (cuda::Saved): on an sm_90 device the forward fills the key and the backward given
// the Saved returns every output bit for bit as the backward that recomputes (dense and packed, the delta rule and
// Mamba2, K = V = 128 and 64, GVA); a Saved made for another problem is refused by name ("saved"), short data too.
// Elsewhere the forward takes the block programs, leaves the key all 0, and the backward recomputes.
TEST_F(Gpu, BackwardSavedIntermediates) {
  const bool sm90 = on_sm90();
  struct SavedShape {
    Member member;
    Shape shape;
  };
  const std::vector<SavedShape> shapes = {
      {Member::gated_deltanet, {"K128_B2_T1000_H2_HV4_states", 2, 1000, 2, 4, 128, 128, {}, true}},
      {Member::deltanet, {"K64_T300_states", 1, 300, 1, 1, 64, 64, {}, true}},
      {Member::mamba2, {"K64_B2_T200_no_states", 2, 200, 1, 1, 64, 64, {}, false}},
      {Member::gated_deltanet, {"K128_varlen_HV2_states", 1, 2049, 1, 2, 128, 128, {0, 0, 1000, 1001, 2049}, true}},
  };
  std::uint64_t salt = 1495;
  std::vector<Case> cases;
  for (const SavedShape& s : shapes) cases.push_back(make_case(s.member, s.shape, {DType::bf16}, {}, test_seed(salt++)));
  for (const Case& c : cases) {
    DeviceCall f(c, stream_);
    const std::size_t bytes = cuda::saved_bytes(c.call, f.offsets);
    DeviceBuffer data(bytes);
    cuda::Saved saved{data.ptr, bytes};
    cuda::ForwardOptions fo;
    fo.save = &saved;
    cuda::forward(c.call, f.forward(), f.offsets, stream_, fo);
    EXPECT_EQ(saved.key[0] != 0, sm90) << c.describe();
    DeviceCall recomputed(c, stream_), from_saved(c, stream_);
    cuda::backward(c.call, recomputed.backward(), recomputed.offsets, stream_);
    cuda::BackwardOptions bo;
    bo.saved = &saved;
    cuda::backward(c.call, from_saved.backward(), from_saved.offsets, stream_, bo);
    recomputed.download(true, stream_);
    from_saved.download(true, stream_);
    EXPECT_EQ(diff_results(from_saved.host.read(true), recomputed.host.read(true)), "") << "saved vs recomputed " << c.describe();
    std::printf("saved %s: %zu bytes, key %s\n", c.describe().c_str(), bytes, saved.key[0] != 0 ? "set" : "all 0");
  }
  if (!sm90) return;
  // A Saved made for another problem (cases[1]'s, given to cases[2]'s backward), and short data.
  DeviceCall f(cases[1], stream_);
  const std::size_t bytes = cuda::saved_bytes(cases[1].call, f.offsets);
  DeviceBuffer data(bytes);
  cuda::Saved saved{data.ptr, bytes};
  cuda::ForwardOptions fo;
  fo.save = &saved;
  cuda::forward(cases[1].call, f.forward(), f.offsets, stream_, fo);
  DeviceCall other(cases[2], stream_);
  cuda::BackwardOptions bo;
  bo.saved = &saved;
  try {
    cuda::backward(cases[2].call, other.backward(), other.offsets, stream_, bo);
    ADD_FAILURE() << "a Saved made for another problem was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(e.argument(), "saved");
  }
  cuda::Saved short_saved{data.ptr, bytes - 256};
  fo.save = &short_saved;
  try {
    cuda::forward(cases[1].call, f.forward(), f.offsets, stream_, fo);
    ADD_FAILURE() << "a short Saved was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(e.argument(), "saved");
  }
  EXPECT_EQ(short_saved.key[0], 0) << "a refused forward left a key";
  cuda_ok(cudaStreamSynchronize(stream_), "sync");
}

// Packed sequences on the sm90 backward with device-only offsets (the chunk table kernel reads them on the device):
// valid ones give the bits of the host-offset call, on the sm90 path on an sm_90 device; invalid ones (decreasing;
// the last one short of T) set the status word and make every output NaN (the poison kernel), as the block programs.
TEST_F(Gpu, BackwardPackedDeviceOffsetsSm90) {
  const Shape s{"K128_varlen_HV2_states", 1, 300, 1, 2, 128, 128, {0, 1, 65, 65, 300}, true};
  const Case c = make_case(Member::gated_deltanet, s, {DType::bf16}, {}, test_seed(1490));
  Params device_only = c.call;
  device_only.cu_seqlens.clear();
  const GpuRun ref = run_gpu(c, true, stream_, false);
  EXPECT_EQ(ref.bpath, on_sm90() ? cuda::BackwardPath::sm90 : cuda::BackwardPath::blocks);
  for (int variant : {0, 1, 2}) {  // 0 valid, 1 decreasing, 2 cu[N] != T
    DeviceCall call(c, stream_);
    std::vector<std::int64_t> cu = s.cu_seqlens;
    if (variant == 1) cu[2] = cu[1] - 1;
    if (variant == 2) cu.back() = s.T - 1;
    DeviceBuffer dcu(cu.size() * sizeof(std::int64_t));
    cuda_ok(cudaMemcpy(dcu.ptr, cu.data(), cu.size() * sizeof(std::int64_t), cudaMemcpyHostToDevice), "cu");
    const cuda::DeviceOffsets off{static_cast<const std::int64_t*>(dcu.ptr), static_cast<std::int64_t>(cu.size()) - 1};
    EXPECT_EQ(cuda::backward_path(device_only, call.backward(), off).path, ref.bpath);
    const std::size_t bytes = cuda::backward_workspace_bytes(device_only, off);
    DeviceBuffer ws(bytes);
    cuda_ok(cudaMemsetAsync(ws.ptr, 0, bytes, stream_), "zero the workspace");
    // outputs zeroed (DeviceCall uploads NaN-poisoned ones): every NaN below is then the backward's own
    for (const DeviceTensor* t : {&call.dq, &call.dk, &call.dv, &call.dg, &call.dbeta, &call.dh0})
      if (t->buf) cuda_ok(cudaMemsetAsync(t->buf->ptr, 0, t->buf->bytes, stream_), "zero the outputs");
    cuda::backward(device_only, call.backward(), off, ws.ptr, bytes, stream_);
    const std::int32_t status = cuda::workspace_status(ws.ptr, stream_);
    call.download(true, stream_);
    const Results r = call.host.read(true);
    if (variant == 0) {
      EXPECT_EQ(status, cuda::kStatusOk);
      EXPECT_EQ(diff_results(r, ref.got), "") << "device-only offsets changed the result";
    } else {
      EXPECT_EQ(status, cuda::kStatusBadOffsets) << "variant " << variant;
      std::size_t n = 0;
      for (const auto* out : {&r.dq, &r.dk, &r.dv, &r.dg, &r.dbeta, &r.dh0})
        for (double x : *out) {
          ++n;
          ASSERT_TRUE(std::isnan(x)) << "an output was not poisoned (variant " << variant << ")";
        }
      EXPECT_GT(n, 0u);
    }
  }
}

// The sm90 backward's workspace is smaller than the block programs' and enough for it (the status word reads ok);
// the two-argument query covers either path; the stream-ordered entry point gives the same bits.
TEST_F(Gpu, BackwardWorkspaceSizesPerPath) {
  const Case c = make_case(Member::gated_deltanet, {"K128_B2_T600_H2", 2, 600, 2, 2, 128, 128, {}, true},
                           {DType::bf16}, {}, test_seed(1500));
  const std::size_t fast = cuda::backward_workspace_bytes(c.call, {}, cuda::BackwardPath::sm90);
  const std::size_t slow = cuda::backward_workspace_bytes(c.call, {}, cuda::BackwardPath::blocks);
  const std::size_t any = cuda::backward_workspace_bytes(c.call, {});
  std::printf("backward workspace at %s: sm90 %zu B, blocks %zu B\n", c.describe().c_str(), fast, slow);
  EXPECT_LT(fast, slow);
  EXPECT_EQ(any, std::max(fast, slow));
  const GpuRun ref = run_gpu(c, true, stream_, false);
  if (bpath_of(c, stream_).path == cuda::BackwardPath::sm90) {
    DeviceCall call(c, stream_);
    DeviceBuffer ws(fast);
    cuda_ok(cudaMemsetAsync(ws.ptr, 0xff, fast, stream_), "poison the workspace");
    cuda::backward(c.call, call.backward(), call.offsets, ws.ptr, fast, stream_);
    EXPECT_EQ(cuda::workspace_status(ws.ptr, stream_), cuda::kStatusOk);
    call.download(true, stream_);
    EXPECT_EQ(diff_results(call.host.read(true), ref.got), "") << "sm90-sized workspace";
    DeviceCall small(c, stream_);
    try {
      cuda::backward(c.call, small.backward(), small.offsets, ws.ptr, fast - 1, stream_);
      ADD_FAILURE() << "a workspace one byte short was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(e.argument(), "workspace");
    }
  }
  DeviceCall call(c, stream_);
  cuda::backward(c.call, call.backward(), call.offsets, stream_);
  call.download(true, stream_);
  EXPECT_EQ(diff_results(call.host.read(true), ref.got), "") << "stream-ordered workspace";
}

}  // namespace
}  // namespace glr::cudatest
