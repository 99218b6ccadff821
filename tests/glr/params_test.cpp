// Every bad problem of issue 3 is rejected by Params::validate with an error naming its argument, and every
// good edge case (an empty sequence, T = 0, strided inputs) is accepted.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "glr/params.hpp"

namespace glr {
namespace {

Params good(Member m = Member::gated_deltanet) {
  return make_params(m, /*B=*/2, /*T=*/10, /*H=*/2, /*HV=*/4, /*K=*/16, /*V=*/8, {}, true, true);
}

// Expects validate to throw InvalidArgument naming `argument`, with `fragment` in the message.
void expect_rejected(const Params& p, const std::string& argument, const std::string& fragment,
                     Pass pass = Pass::backward, Backend backend = Backend::cpu) {
  try {
    p.validate(pass, backend);
    ADD_FAILURE() << "accepted; expected an error naming " << argument;
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(argument), std::string::npos) << e.what();
  }
}

TEST(GlrParams, GoodProblemsAreAccepted) {
  for (Member m : {Member::gated_deltanet, Member::deltanet, Member::mamba2, Member::retnet,
                   Member::linear_attention})
    EXPECT_NO_THROW(good(m).validate(Pass::backward)) << name_of(m);
  // A packed batch with an empty sequence, first, inside and last.
  EXPECT_NO_THROW(make_params(Member::gated_deltanet, 1, 9, 1, 2, 8, 8, {0, 0, 4, 4, 9, 9}, true, true));
  // T = 0 is a problem with nothing to do but pass states through.
  EXPECT_NO_THROW(make_params(Member::deltanet, 3, 0, 1, 1, 8, 8, {}, true, true));
  EXPECT_NO_THROW(good().validate(Pass::forward, Backend::cpu));
}

TEST(GlrParams, SizesAreChecked) {
  auto p = good();
  p.HV = 3;
  expect_rejected(p, "HV", "multiple of H = 2");
  p = good();
  p.H = 0;
  expect_rejected(p, "H", ">= 1");
  p = good();
  p.B = 0;
  expect_rejected(p, "B", ">= 1");
  p = good();
  p.T = -1;
  expect_rejected(p, "T", ">= 0");
  p = good();
  p.K = 0;
  expect_rejected(p, "K", ">= 1");
  p = good();
  p.V = -3;
  expect_rejected(p, "V", ">= 1");
  p = good();
  p.chunk = 0;
  expect_rejected(p, "chunk", ">= 1");
  p = good();
  p.scale = std::nan("");
  expect_rejected(p, "scale", "finite");
}

TEST(GlrParams, GpuHeadDimsAndChunkAreEnforcedOnlyForTheGpu) {
  auto p = make_params(Member::gated_deltanet, 1, 5, 1, 1, 64, 128);
  EXPECT_NO_THROW(p.validate(Pass::backward, Backend::gpu));
  p = make_params(Member::gated_deltanet, 1, 5, 1, 1, 48, 128);
  EXPECT_NO_THROW(p.validate(Pass::backward, Backend::cpu));
  expect_rejected(p, "K", "not supported on the GPU", Pass::backward, Backend::gpu);
  p = make_params(Member::gated_deltanet, 1, 5, 1, 1, 64, 96);
  expect_rejected(p, "V", "supported: 64, 128", Pass::forward, Backend::gpu);
  p = make_params(Member::gated_deltanet, 1, 5, 1, 1, 64, 64, {}, false, false, 32);
  expect_rejected(p, "chunk", "not supported on the GPU", Pass::forward, Backend::gpu);
}

TEST(GlrParams, CuSeqlensAreChecked) {
  auto p = make_params(Member::gated_deltanet, 1, 9, 1, 1, 8, 8, {0, 4, 9});
  p.cu_seqlens = {0, 5, 4, 9};
  expect_rejected(p, "cu_seqlens", "non-decreasing: cu_seqlens[2] = 4 < cu_seqlens[1] = 5");
  p.cu_seqlens = {1, 4, 9};
  expect_rejected(p, "cu_seqlens", "cu_seqlens[0] must be 0");
  p.cu_seqlens = {0, 4, 10};
  expect_rejected(p, "cu_seqlens", "must equal the total length T = 9");
  p.cu_seqlens = {0, 4, 8};
  expect_rejected(p, "cu_seqlens", "must equal the total length T = 9");
  p.cu_seqlens = {0};
  expect_rejected(p, "cu_seqlens", "at least 2 offsets");
  p.cu_seqlens = {0, 9};
  p.B = 2;
  expect_rejected(p, "B", "must be 1 with cu_seqlens");
}

TEST(GlrParams, StridesAreChecked) {
  auto p = good();
  p.strides.k.token = -1;
  expect_rejected(p, "strides.k", "negative stride");
  // Outputs may not overlap themselves...
  p = good();
  p.strides.o.head = 0;
  expect_rejected(p, "strides.o", "overlap", Pass::forward);
  p = good();
  p.strides.dq.token = p.strides.dq.head;  // token and head share addresses
  expect_rejected(p, "strides.dq", "overlap");
  p = good();
  p.strides.ht = {};
  expect_rejected(p, "strides.ht", "overlap", Pass::forward);
  p = good();
  p.strides.dbeta.batch = 1;
  expect_rejected(p, "strides.dbeta", "overlap");
  // ...but inputs may broadcast, and a padded or permuted output layout is fine.
  p = good();
  p.strides.q.batch = 0;
  p.strides.v.head = 0;
  p.strides.o = {8, 64, 16, 1};  // o [2, 10, 4, 8] with tokens outermost, then heads, then batch
  EXPECT_NO_THROW(p.validate(Pass::forward));
  p.strides.o = {1000, 40, 10, 1};  // padded rows
  EXPECT_NO_THROW(p.validate(Pass::forward));
  // The backward's strides are not checked by a forward-only validation.
  p = good();
  p.strides.dq = {};
  EXPECT_NO_THROW(p.validate(Pass::forward));
  expect_rejected(p, "strides.dq", "overlap", Pass::backward);
  // Tensors a member does not have are not checked.
  p = good(Member::linear_attention);
  p.strides.beta.token = -5;
  p.strides.g.token = -5;
  EXPECT_NO_THROW(p.validate(Pass::backward));
  p = good(Member::retnet);  // constant gate: only the head stride of g matters
  p.strides.dg = {0, 0, 1};
  EXPECT_NO_THROW(p.validate(Pass::backward));
  p.strides.dg = {0, 0, 0};
  expect_rejected(p, "strides.dg", "overlap");
}

}  // namespace
}  // namespace glr
