// Bad calls are refused before any work, with an error naming the argument (glr/glr_cuda.hpp). The
// checks are the host-side setup the GPU entry points run, exercised here through the emulator.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "case.hpp"
#include "common/pipeline.hpp"
#include "shapes.hpp"

namespace glr::cudatest {
namespace {

Case base(Member m = Member::gated_deltanet) {
  return make_case(m, emulation_shapes()[2], {}, {}, test_seed(7));
}

template <class F>
void expect_refused(F&& call, const std::string& argument, const std::string& fragment = "") {
  try {
    call();
    ADD_FAILURE() << "accepted; expected an error naming " << argument;
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
    if (!fragment.empty()) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  }
}

// The strict (GPU) dtype rules: the emulator's wide mode off.
constexpr cuda::EmuOptions kStrict{false, false, false};

TEST(Validation, UnsupportedHeadDim) {
  Params p = make_params(Member::deltanet, 1, 10, 1, 1, 32, 64, {}, false, false);
  CallTensors t;  // never reached
  expect_refused([&] { cuda::emulate_forward<float>(p, t.forward(), kStrict); }, "K", "not supported on the GPU");
}

TEST(Validation, DtypeMismatches) {
  Case c = base();
  {
    CallTensors t = make_call(c);
    auto f = t.forward();
    f.k.dtype = DType::f16;
    expect_refused([&] { cuda::emulate_forward<float>(c.call, f, kStrict); }, "k.dtype", "does not match q");
  }
  {
    CallTensors t = make_call(c);
    auto f = t.forward();
    f.q.dtype = f.k.dtype = f.v.dtype = f.o.dtype = DType::f32;
    expect_refused([&] { cuda::emulate_forward<float>(c.call, f, kStrict); }, "q.dtype", "bf16 or fp16");
  }
  {
    CallTensors t = make_call(c);
    auto f = t.forward();
    f.h0.dtype = DType::bf16;
    expect_refused([&] { cuda::emulate_forward<float>(c.call, f, kStrict); }, "h0.dtype", "fp32");
  }
  {
    CallTensors t = make_call(c);
    auto b = t.backward();
    b.dg.dtype = DType::bf16;  // g is fp32
    expect_refused([&] { cuda::emulate_backward<float>(c.call, b, kStrict); }, "dg.dtype", "does not match g");
  }
}

TEST(Validation, MisalignedPointer) {
  Case c = base();
  CallTensors t = make_call(c);
  auto f = t.forward();
  f.g.data = static_cast<const char*>(f.g.data) + 1;  // fp32 g one byte off
  expect_refused([&] { cuda::emulate_forward<float>(c.call, f, kStrict); }, "g", "not aligned");
}

TEST(Validation, MissingAndUnexpectedTensors) {
  Case c = base();
  {
    CallTensors t = make_call(c);
    auto f = t.forward();
    f.beta = {};
    expect_refused([&] { cuda::emulate_forward<float>(c.call, f, kStrict); }, "beta", "missing");
  }
  {
    Case r = base(Member::linear_attention);
    CallTensors t = make_call(r);
    CallTensors other = make_call(c);
    auto f = t.forward();
    f.g = other.forward().g;  // a gate for an ungated member
    expect_refused([&] { cuda::emulate_forward<float>(r.call, f, kStrict); }, "g", "has none");
  }
}

TEST(Validation, InvalidHostOffsets) {
  Case c = base();
  Params p = c.call;
  p.cu_seqlens = {0, 7, 6, 71, 72, 150};
  CallTensors t = make_call(c);
  expect_refused([&] { cuda::emulate_forward<float>(p, t.forward(), kStrict); }, "cu_seqlens", "non-decreasing");
}

TEST(Validation, DeviceOffsetsNeedOneBatchRow) {
  Params p = make_params(Member::deltanet, 2, 10, 1, 1, 64, 64, {}, false, false);
  const std::int64_t cu[] = {0, 10};
  const cuda::DeviceOffsets off{cu, 1};
  CallTensors t;
  expect_refused([&] { cuda::emulate_forward<float>(p, t.forward(), kStrict, &off); }, "B", "must be 1");
}

TEST(Validation, OverlappingOutput) {
  Case c = base();
  Params p = c.call;
  p.strides.o.head = 0;  // every value head written to the same place
  CallTensors t = make_call(c);
  expect_refused([&] { cuda::emulate_forward<float>(p, t.forward(), kStrict); }, "strides.o", "overlap");
}

}  // namespace
}  // namespace glr::cudatest

namespace glr::cudatest {
namespace {

// Every stage's shared memory fits one Hopper block (227 KB opt-in), for every head-dim pair the kernels
// compile; the table is the one the report quotes.
template <int K, int V>
void smem_rows(std::size_t& worst) {
  using A = float;
  const std::pair<const char*, std::size_t> rows[] = {
      {cuda::WyFwd<A, K, V>::kName, cuda::WyFwd<A, K, V>::smem_bytes()},
      {cuda::StateFwd<A, K, V>::kName, cuda::StateFwd<A, K, V>::smem_bytes()},
      {cuda::OutputFwd<A, K, V>::kName, cuda::OutputFwd<A, K, V>::smem_bytes()},
      {cuda::DvLocal<A, K, V>::kName, cuda::DvLocal<A, K, V>::smem_bytes()},
      {cuda::StateBwd<A, K, V>::kName, cuda::StateBwd<A, K, V>::smem_bytes()},
      {cuda::Dqkwg<A, K, V>::kName, cuda::Dqkwg<A, K, V>::smem_bytes()},
      {cuda::WyBwd<A, K, V>::kName, cuda::WyBwd<A, K, V>::smem_bytes()},
  };
  for (const auto& [name, bytes] : rows) {
    std::printf("  K=%-3d V=%-3d %-10s %7zu bytes\n", K, V, name, bytes);
    EXPECT_LE(bytes, 232448u) << name << " K=" << K << " V=" << V;
    worst = std::max(worst, bytes);
  }
}

TEST(Smem, EveryStageFitsOneHopperBlock) {
  std::size_t worst = 0;
  smem_rows<64, 64>(worst);
  smem_rows<64, 128>(worst);
  smem_rows<128, 64>(worst);
  smem_rows<128, 128>(worst);
  std::printf("  largest: %zu bytes of 232448\n", worst);
}

}  // namespace
}  // namespace glr::cudatest
