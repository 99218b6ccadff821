// Defects planted: a matmul that rounds both operands of every product to bf16 (a tensor-core kernel) with
// nothing declared, and the same with its partial sums kept in bf16 or fp16. Gate: accumulation. An output
// that declares `operands` (r roundings at u_op per term) is judged against gamma_r(u_op) + gamma_{N+4}(u_w) +
// their product: the declared rounding passes, an accumulator below the working precision still fails, and an
// output that declares nothing keeps the exact-operand bound gamma_{N+4}(u_w).
#include <gtest/gtest.h>

#include "kgate/dtype.hpp"
#include "kit.hpp"

namespace kgate::test {
namespace {

// c = a @ b with a and b rounded to bf16 first; `acc` the precision the running sum is kept in. A product of
// two bf16 values is exact in f32 (8 + 8 significant bits), so each term carries exactly 2 bf16 roundings.
std::int32_t bf16_operand_matmul(const kgate_call& c, DType acc) {
  const DLTensor &a = in(c, 0), &b = in(c, 1);
  const std::int64_t m = a.shape[0], k = a.shape[1], n = b.shape[1];
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::int64_t p = 0; p < k; ++p)
        s = round_to(s + round_to(load2(a, i, p), DType::bf16) * round_to(load2(b, p, j), DType::bf16), acc);
      store2(out(c, 0), i, j, s);
    }
  return KGATE_OK;
}
std::int32_t bf16_operands_f32_sum(const kgate_call& c) { return bf16_operand_matmul(c, DType::f32); }
std::int32_t bf16_operands_bf16_sum(const kgate_call& c) { return bf16_operand_matmul(c, DType::bf16); }
std::int32_t bf16_operands_f16_sum(const kgate_call& c) { return bf16_operand_matmul(c, DType::f16); }

// The kit's matmul; `positive_k`: the accumulation case at K = k with a, b drawn positive from [0.5, 1] (f16
// values, which bf16 rounds), else the default (K = 4096, every input constant 1).
Subject matmul_with(std::optional<TensorSpec::OperandRounding> operands, std::int64_t positive_k = 0) {
  Subject s{matmul_contract(), matmul_oracle()};
  s.contract.outputs[0].operands = operands;
  if (positive_k > 0) {
    s.contract.accumulation.sizes = {{"K", positive_k}};
    s.contract.accumulation.inputs = {{"a", AccumulationInput::Pattern::positive, 1.0},
                                      {"b", AccumulationInput::Pattern::positive, 1.0}};
  }
  return s;
}

const TensorSpec::OperandRounding kBf16Twice{DType::bf16, 2};

TEST(AccumulationOperands, UndeclaredOperandRoundingFailsTheExactOperandBound) {
  // Four terms: gamma_8(2^-24) + 8 u_f32 ~ 1e-6 relative, and each term is off by up to 2^-7.
  const Report r = run(matmul_with(std::nullopt, 4), bf16_operands_f32_sum, 1, {"accumulation"});
  EXPECT_EQ(r.gates[0].verdict, Verdict::fail) << r.gates[0].summary;
}

TEST(AccumulationOperands, DeclaredOperandRoundingPasses) {
  for (const std::int64_t k : {4, 4096}) {
    const Report r = run(matmul_with(kBf16Twice, k), bf16_operands_f32_sum, 1, {"accumulation"});
    EXPECT_EQ(r.gates[0].verdict, Verdict::pass) << "K " << k << ": " << r.gates[0].summary;
  }
  // Declaring more roundings than the kernel makes is allowed (a looser bound), and the f32 kernel passes it.
  const Report r = run(matmul_with(kBf16Twice, 4), matmul_kernel, 1, {"accumulation"});
  EXPECT_EQ(r.gates[0].verdict, Verdict::pass) << r.gates[0].summary;
}

TEST(AccumulationOperands, LowPrecisionAccumulatorStillFailsWithOperandsDeclared) {
  // 4096 ones: a bf16 sum stalls at 256, an fp16 one at 2048; the declared term allows ~2^-7 relative.
  const Report bf = run(matmul_with(kBf16Twice), bf16_operands_bf16_sum, 1, {"accumulation"});
  EXPECT_EQ(bf.gates[0].verdict, Verdict::fail) << bf.gates[0].summary;
  EXPECT_GT(bf.gates[0].error_ratio, 10.0);
  const Report hf = run(matmul_with(kBf16Twice), bf16_operands_f16_sum, 1, {"accumulation"});
  EXPECT_EQ(hf.gates[0].verdict, Verdict::fail) << hf.gates[0].summary;
  EXPECT_GT(hf.gates[0].error_ratio, 10.0);
  // Positive inputs at K = 4096 too (no constant that sums exactly).
  const Report bp = run(matmul_with(kBf16Twice, 4096), bf16_operands_bf16_sum, 1, {"accumulation"});
  EXPECT_EQ(bp.gates[0].verdict, Verdict::fail) << bp.gates[0].summary;
}

}  // namespace
}  // namespace kgate::test
