// The CUDA stages run on the host (glr/cuda/emu), checked without a GPU:
//   * in double they are the chunked algorithm: every output and gradient within 1e-10 of the float64
//     oracle, and every stage's workspace buffer within 1e-10 of its CPU twin (glr/reference/chunked.hpp),
//     for every member and shape feature, in contiguous, strided and offset-by-one layouts;
//   * the threads of each phase and the blocks of each grid run in either order with bitwise-identical
//     results (no phase reads what another thread of the same phase writes; no block reads another's);
//   * in float with bf16/fp16 storage they meet the error bounds the GPU test states (shapes.hpp);
//   * device-only offsets are checked on the device: valid ones give the same bits as host offsets,
//     invalid ones set the status word and make every output NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "case.hpp"
#include "shapes.hpp"

namespace glr::cudatest {
namespace {

using cuda::EmuOptions;

struct Named {
  const char* name;
  const std::vector<double>* got;
  const std::vector<double>* ref;
};

std::vector<Named> outputs(const Results& got, const Results& ref, bool backward) {
  if (!backward) return {{"o", &got.o, &ref.o}, {"ht", &got.ht, &ref.ht}};
  return {{"dq", &got.dq, &ref.dq}, {"dk", &got.dk, &ref.dk},       {"dv", &got.dv, &ref.dv},
          {"dg", &got.dg, &ref.dg}, {"dbeta", &got.dbeta, &ref.dbeta}, {"dh0", &got.dh0, &ref.dh0}};
}

// Runs one pass in emulation and returns what the call wrote.
template <class Acc>
Results emulate(const Case& c, bool backward, const EmuOptions& opt = {}, std::vector<double>* workspace = nullptr,
                std::vector<StageError>* stages = nullptr) {
  CallTensors t = make_call(c);
  if (!backward) {
    auto run = cuda::emulate_forward<Acc>(c.call, t.forward(), opt);
    if (workspace) *workspace = run.storage;
    if (stages) *stages = stage_errors(c, run.work, false);
  } else {
    auto run = cuda::emulate_backward<Acc>(c.call, t.backward(), opt);
    if (workspace) *workspace = run.storage;
    if (stages) *stages = stage_errors(c, run.work, true);
  }
  return t.read(backward);
}

Dtypes all_f64() { return {DType::f64, DType::f64, DType::f64}; }

struct EmuCase {
  Member member;
  Shape shape;
};
std::vector<EmuCase> all_cases() {
  std::vector<EmuCase> v;
  for (Member m : kMembers)
    for (const Shape& s : emulation_shapes()) v.push_back({m, s});
  return v;
}
std::string case_name(const testing::TestParamInfo<EmuCase>& i) {
  return std::string(member_name(i.param.member)) + "_" + i.param.shape.name;
}

class EmuDouble : public testing::TestWithParam<EmuCase> {};

TEST_P(EmuDouble, MatchesOracleAndEveryStage) {
  const EmuCase& ec = GetParam();
  const Case c = make_case(ec.member, ec.shape, all_f64(), {}, test_seed(1));
  for (bool backward : {false, true}) {
    std::vector<StageError> stages;
    const Results got = emulate<double>(c, backward, {}, nullptr, &stages);
    const Results ref = oracle(c, backward);
    for (const Named& n : outputs(got, ref, backward))
      EXPECT_LE(rel_err(*n.got, *n.ref), 1e-10) << n.name << " " << c.describe();
    for (const StageError& s : stages) EXPECT_LE(s.err, 1e-10) << "stage " << s.stage << " " << c.describe();
  }
}

INSTANTIATE_TEST_SUITE_P(AllMembers, EmuDouble, testing::ValuesIn(all_cases()), case_name);

TEST(EmuDoubleLayout, StridedAndOffsetByOneElement) {
  for (Member m : {Member::gated_deltanet, Member::retnet}) {
    const Shape s = emulation_shapes()[2];  // packed, K != V
    for (Layout layout : {Layout{true, false}, Layout{false, true}, Layout{true, true}}) {
      const Case c = make_case(m, s, all_f64(), layout, test_seed(2));
      for (bool backward : {false, true}) {
        const Results got = emulate<double>(c, backward);
        const Results ref = oracle(c, backward);
        for (const Named& n : outputs(got, ref, backward))
          EXPECT_LE(rel_err(*n.got, *n.ref), 1e-10) << n.name << " " << c.describe();
      }
    }
  }
}

// Raw bytes of everything a run wrote: outputs (with their padding) and the workspace.
std::vector<double> raw(const Case& c, bool backward, const EmuOptions& opt) {
  CallTensors t = make_call(c);
  std::vector<double> bytes;
  if (!backward) {
    bytes = cuda::emulate_forward<float>(c.call, t.forward(), opt).storage;
    for (const HostTensor* h : {&t.o, &t.ht})
      if (!h->empty()) bytes.insert(bytes.end(), h->storage.begin(), h->storage.end());
  } else {
    bytes = cuda::emulate_backward<float>(c.call, t.backward(), opt).storage;
    for (const HostTensor* h : {&t.dq, &t.dk, &t.dv, &t.dg, &t.dbeta, &t.dh0})
      if (!h->empty()) bytes.insert(bytes.end(), h->storage.begin(), h->storage.end());
  }
  return bytes;
}

TEST(EmuOrder, ThreadAndBlockOrderGiveTheSameBits) {
  for (Member m : {Member::gated_deltanet, Member::mamba2, Member::retnet}) {
    for (const Shape& s : {emulation_shapes()[2], emulation_shapes()[3]}) {
      const Case c = make_case(m, s, {}, {}, test_seed(3));
      for (bool backward : {false, true}) {
        const std::vector<double> a = raw(c, backward, {});
        const std::vector<double> b = raw(c, backward, {true, true});
        ASSERT_EQ(a.size(), b.size());
        EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(double)))
            << (backward ? "backward" : "forward") << " " << c.describe();
      }
    }
  }
}

// Float emulation with 16-bit storage: the bounds the GPU test uses, and the table of measured errors.
TEST(EmuFloat, MeetsTheStatedBounds) {
  std::printf("%-8s %-17s %-22s %-5s %10s %10s %10s\n", "output", "member", "shape", "dtype", "err", "err_fp32",
              "bound");
  for (DType x : {DType::bf16, DType::f16})
    for (Member m : kMembers)
      for (const Shape& s : emulation_shapes()) {
        const Case c = make_case(m, s, {x, DType::f32, DType::f32}, {}, test_seed(4));
        Case wide = c;  // the same values, outputs kept in fp32: the arithmetic's share of the error
        wide.dt = {DType::f32, DType::f32, DType::f32};
        for (bool backward : {false, true}) {
          const Results ref = oracle(c, backward);
          const Results got = emulate<float>(c, backward);
          const Results got32 = emulate<float>(wide, backward);
          const auto a = outputs(got, ref, backward), b = outputs(got32, ref, backward);
          for (std::size_t i = 0; i < a.size(); ++i) {
            if (a[i].ref->empty()) continue;
            const bool is_state = std::string(a[i].name) == "ht" || std::string(a[i].name) == "dh0";
            const bool is_gate = std::string(a[i].name) == "dg" || std::string(a[i].name) == "dbeta";
            const DType out = is_state ? DType::f32 : is_gate ? DType::f32 : x;
            const double err = rel_err(*a[i].got, *a[i].ref), err32 = rel_err(*b[i].got, *b[i].ref);
            const double bound = error_bound(a[i].name, out);
            std::printf("%-8s %-17s %-22s %-5s %10.3e %10.3e %10.3e\n", a[i].name, member_name(m), s.name.c_str(),
                        cuda::name_of(out), err, err32, bound);
            EXPECT_LE(err, bound) << a[i].name << " " << c.describe();
          }
        }
      }
}

// Device-only offsets (no host copy in Params), int64 and int32: same bits as with the host copy.
TEST(DeviceOffsets, ValidOffsetsGiveTheSameResults) {
  const Shape s = emulation_shapes()[2];
  const Case c = make_case(Member::gated_deltanet, s, {}, {}, test_seed(5));
  Params device_only = c.call;
  device_only.cu_seqlens.clear();
  const std::vector<std::int64_t> cu = s.cu_seqlens;
  const cuda::DeviceOffsets off{cu.data(), static_cast<std::int64_t>(cu.size()) - 1};
  const std::vector<std::int32_t> cu32(cu.begin(), cu.end());
  cuda::DeviceOffsets off32;
  off32.cu_seqlens32 = cu32.data();
  off32.num_seqs = off.num_seqs;
  for (bool backward : {false, true})
    for (const cuda::DeviceOffsets* o : std::vector<const cuda::DeviceOffsets*>{&off, &off32}) {
      CallTensors a = make_call(c), b = make_call(c);
      if (!backward) {
        cuda::emulate_forward<float>(c.call, a.forward());
        cuda::emulate_forward<float>(device_only, b.forward(), {}, o);
      } else {
        cuda::emulate_backward<float>(c.call, a.backward());
        cuda::emulate_backward<float>(device_only, b.backward(), {}, o);
      }
      const Results ra = a.read(backward), rb = b.read(backward);
      for (const Named& n : outputs(ra, rb, backward))
        EXPECT_EQ(*n.got, *n.ref) << n.name << (o == &off32 ? " (int32 offsets)" : " (int64 offsets)");
    }
}

TEST(DeviceOffsets, InvalidOffsetsSetTheStatusAndPoisonEveryOutput) {
  const Shape s = emulation_shapes()[2];
  const Case c = make_case(Member::gated_deltanet, s, {}, {}, test_seed(6));
  Params device_only = c.call;
  device_only.cu_seqlens.clear();
  const std::vector<std::vector<std::int64_t>> bad = {
      {1, 7, 7, 71, 72, 150},    // does not start at 0
      {0, 7, 6, 71, 72, 150},    // decreases
      {0, 7, 7, 71, 72, 149},    // does not end at T
  };
  for (const auto& cu : bad) {
    const cuda::DeviceOffsets off{cu.data(), static_cast<std::int64_t>(cu.size()) - 1};
    for (bool backward : {false, true}) {
      CallTensors t = make_call(c);
      std::int32_t status = -1;
      if (!backward) {
        auto run = cuda::emulate_forward<float>(device_only, t.forward(), {}, &off);
        status = run.work.status[0];
      } else {
        auto run = cuda::emulate_backward<float>(device_only, t.backward(), {}, &off);
        status = run.work.status[0];
      }
      EXPECT_EQ(status, cuda::kStatusBadOffsets);
      const Results r = t.read(backward);
      for (const Named& n : outputs(r, r, backward))
        for (double x : *n.got) ASSERT_TRUE(std::isnan(x)) << n.name << " not poisoned";
    }
  }
}

}  // namespace
}  // namespace glr::cudatest
