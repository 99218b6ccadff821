// Oracles behind a Target: inputs widened to f64, outputs read back as f64, and every way the oracle can fail
// turned into an OracleError that names it.
#include <gtest/gtest.h>

#include "kgate/gate.hpp"
#include "kit.hpp"

namespace kgate::test {
namespace {

std::vector<HostArray> inputs() {
  HostArray x(DType::bf16, {2, 3}), n(DType::i32, {2});
  for (int i = 0; i < 6; ++i) x.set(i, 0.5 * i - 1);
  n.set(0, 7);
  n.set(1, -2);
  return {x, n};
}

Contract two_inputs() {
  Contract c;
  c.name = "scale_rows";
  c.dims = {dim("R", 1, 8, 2), dim("C", 1, 8, 3)};
  c.inputs = {tensor("x", DType::bf16, {"R", "C"}), tensor("n", DType::i32, {"R"})};
  c.outputs = {tensor("y", DType::bf16, {"R", "C"}), tensor("k", DType::i64, {"R"})};
  return c;
}

// y = x * n (per row), k = n + 1, computed by an f64 entry point behind a Target.
std::int32_t f64_entry(const kgate_call& c) {
  if (dtype_of(in(c, 0)) != DType::f64 || dtype_of(out(c, 0)) != DType::f64) return KGATE_ERROR;
  if (dtype_of(in(c, 1)) != DType::i32 || dtype_of(out(c, 1)) != DType::i64) return KGATE_ERROR;
  for (std::int64_t i = 0; i < count(in(c, 0)); ++i) store(out(c, 0), i, load(in(c, 0), i) * load(in(c, 1), i / 3));
  for (std::int64_t r = 0; r < 2; ++r) store(out(c, 1), r, load(in(c, 1), r) + 1);
  return KGATE_OK;
}

TEST(TargetOracle, WidensFloatsKeepsIntegersAndReturnsF64) {
  auto o = make_target_oracle(make_inprocess_target("oracle.so", f64_entry), two_inputs());
  EXPECT_NE(o->describe().find("oracle.so"), std::string::npos);
  const auto out = o->evaluate(inputs(), {{"R", 2}, {"C", 3}}, {});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].dtype(), DType::f64);
  EXPECT_EQ(out[1].dtype(), DType::i64);
  EXPECT_EQ(out[0].get(5), (0.5 * 5 - 1) * -2);
  EXPECT_EQ(out[1].get(0), 8);
}

void expect_oracle_error(EntryFn fn, const std::string& fragment) {
  auto o = make_target_oracle(make_inprocess_target("bad oracle", std::move(fn)), two_inputs());
  try {
    o->evaluate(inputs(), {{"R", 2}, {"C", 3}}, {});
    FAIL() << "no OracleError";
  } catch (const OracleError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad oracle"), std::string::npos) << e.what();
  }
}

TEST(TargetOracle, RefusalErrorAndStrayWritesAreOracleErrors) {
  expect_oracle_error([](const kgate_call& c) {
    std::snprintf(c.message, c.message_capacity, "R must be 4");
    return KGATE_REFUSED;
  }, "R must be 4");
  expect_oracle_error([](const kgate_call&) { return KGATE_ERROR; }, "failed");
  expect_oracle_error([](const kgate_call& c) {
    f64_entry(c);
    static_cast<double*>(out(c, 0).data)[6] = 0;
    return KGATE_OK;
  }, "wrote outside");
  expect_oracle_error([](const kgate_call&) -> std::int32_t { throw std::runtime_error("boom"); }, "boom");
}

TEST(TargetOracle, WrongInputCountIsAnOracleError) {
  auto o = make_target_oracle(make_inprocess_target("o", f64_entry), two_inputs());
  EXPECT_THROW(o->evaluate({}, {{"R", 2}, {"C", 3}}, {}), OracleError);
}

TEST(FunctionOracle, ExceptionsBecomeOracleErrors) {
  auto o = make_function_oracle("fn", [](const std::vector<HostArray>&, const Bindings&, const Attrs&)
                                          -> std::vector<HostArray> { throw std::out_of_range("index 9"); });
  try {
    o->evaluate({}, {{"N", 1}}, {});
    FAIL();
  } catch (const OracleError& e) {
    EXPECT_NE(std::string(e.what()).find("index 9"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("N=1"), std::string::npos) << "says where";
  }
  EXPECT_THROW(make_function_oracle("empty", nullptr), std::invalid_argument);
}

}  // namespace
// The memo key an input set caches (GateContext hashes a set's bytes once): a copy starts without it, so a
// copy that is then changed can never be looked up under the original's values.
TEST(InputSetKey, ACopyDoesNotInheritTheCachedKey) {
  InputSet a;
  a.content_key.known = true;
  a.content_key.a = 1;
  InputSet b = a;
  EXPECT_FALSE(b.content_key.known);
  b.content_key.known = true;
  b = a;
  EXPECT_FALSE(b.content_key.known);
  EXPECT_TRUE(a.content_key.known);
}

}  // namespace kgate::test
