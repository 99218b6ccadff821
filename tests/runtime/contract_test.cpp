// The contract reader: a valid file reads into the Contract it describes, and every malformed or
// contradictory file is rejected with the file, line, column and field of the mistake.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "kgate/contract.hpp"

namespace kgate {
namespace {

// A contract in the style of the glr family: packed sequences, grouped heads, an attr-sized block.
constexpr const char* kValid = R"(# line 1
[op]
name = "gated_delta"
description = "chunked gated delta rule, forward"
working_precision = "f32"
deterministic = true

[dims]
K = 64   # a fixed size

[dims.T]
min = 1
max = 4096
nominal = 256
large = 2048

[dims.H]
min = 1
max = 8
nominal = 2

[dims.HV]
min = 1
max = 16
nominal = 4
multiple_of = "H"

[dims.N]
min = 1
max = 8
nominal = 3

[attrs]
scale = 0.125
chunk = 64

[[inputs]]
name = "q"
dtype = "bf16"
shape = [1, "T", "H", "K"]
layout = "strided"

[[inputs]]
name = "g"
dtype = "float32"
shape = [1, "T", "HV"]
domain = { kind = "uniform", low = -1.0, high = 0 }
overflow = false

[[inputs]]
name = "cu_seqlens"
dtype = "i32"
shape = ["N+1"]
domain = { kind = "offsets", total = "T" }
nonfinite = false

[[outputs]]
name = "o"
dtype = "bf16"
shape = [1, "T", "HV", "K"]
reduced = ["T", "K"]
operands = { precision = "bfloat16", roundings = 2 }
[outputs.tolerance]
rtol = 0.02
scale = 2

[nonfinite]
dim = "T"
block = "chunk"
segments = "cu_seqlens"
direction = "forward"
inf_may_become_nan = true

[accumulation]
sizes = { T = 4096 }
[[accumulation.inputs]]
input = "q"
pattern = "positive"
value = 2.0

[limits]
max_case_elements = 1000000
timeout = 5
)";

TEST(Contract, ValidFileReadsIntoTheStruct) {
  const Contract c = parse_contract(kValid, "valid.toml");
  EXPECT_EQ(c.path, "valid.toml");
  EXPECT_EQ(c.name, "gated_delta");
  EXPECT_EQ(c.working_precision, DType::f32);
  ASSERT_EQ(c.dims.size(), 5u);
  // File order, not alphabetical (which would put H before T).
  EXPECT_EQ(c.dims[0].name, "K");
  EXPECT_EQ(c.dims[1].name, "T");
  EXPECT_EQ(c.dims[4].name, "N");
  EXPECT_EQ(c.dims[0].min, 64);
  EXPECT_EQ(c.dims[0].max, 64);
  EXPECT_EQ(c.dims[1].large, 2048);
  EXPECT_EQ(c.dims[3].multiple_of_dim, "H");
  ASSERT_EQ(c.attrs.size(), 2u);
  EXPECT_EQ(c.attrs[0].first, "scale");  // file order again: "chunk" sorts first
  EXPECT_DOUBLE_EQ(c.attr("chunk", 0), 64.0);
  EXPECT_DOUBLE_EQ(c.attr("missing", -3.0), -3.0);

  ASSERT_EQ(c.inputs.size(), 3u);
  EXPECT_EQ(c.inputs[0].dtype, DType::bf16);
  EXPECT_TRUE(c.inputs[0].strided);
  EXPECT_EQ(c.inputs[0].domain.kind, DomainKind::normal);
  EXPECT_EQ(c.inputs[1].domain.kind, DomainKind::uniform);
  EXPECT_DOUBLE_EQ(c.inputs[1].domain.a, -1.0);
  EXPECT_FALSE(c.inputs[1].overflow);
  EXPECT_EQ(c.inputs[2].domain.kind, DomainKind::offsets);
  EXPECT_EQ(c.inputs[2].domain.total, "T");
  EXPECT_FALSE(c.inputs[2].nonfinite);

  ASSERT_EQ(c.outputs.size(), 1u);
  EXPECT_EQ(c.outputs[0].reduced, (std::vector<std::string>{"T", "K"}));
  EXPECT_DOUBLE_EQ(*c.outputs[0].rtol, 0.02);
  EXPECT_FALSE(c.outputs[0].atol.has_value());
  EXPECT_DOUBLE_EQ(c.outputs[0].tolerance_scale, 2.0);
  ASSERT_TRUE(c.outputs[0].operands.has_value());
  EXPECT_EQ(c.outputs[0].operands->precision, DType::bf16);
  EXPECT_EQ(c.outputs[0].operands->roundings, 2);

  EXPECT_FALSE(c.spread.exact);
  EXPECT_EQ(c.spread.dim, "T");
  EXPECT_EQ(c.spread.block, 64);
  EXPECT_EQ(c.spread.block_attr, "chunk");
  EXPECT_EQ(c.spread.segments, "cu_seqlens");
  EXPECT_TRUE(c.spread.inf_may_become_nan);

  ASSERT_EQ(c.accumulation.inputs.size(), 1u);
  EXPECT_EQ(c.accumulation.inputs[0].pattern, AccumulationInput::Pattern::positive);
  EXPECT_EQ(c.accumulation.sizes.at("T"), 4096);
  EXPECT_EQ(c.max_case_elements, 1000000);
  EXPECT_DOUBLE_EQ(c.timeout_seconds, 5.0);
}

TEST(Contract, ResolveAndAdmissible) {
  const Contract c = parse_contract(kValid, "valid.toml");
  Bindings b = c.nominal();
  EXPECT_EQ(b.at("T"), 256);
  EXPECT_EQ(c.inputs[0].resolve(b), (Shape{1, 256, 2, 64}));
  EXPECT_EQ(c.inputs[2].resolve(b), (Shape{4}));  // N+1
  std::string why;
  EXPECT_TRUE(c.admissible(b, &why)) << why;

  b["HV"] = 3;  // not a multiple of H = 2
  EXPECT_FALSE(c.admissible(b, &why));
  EXPECT_EQ(why, "HV=3 is not a multiple of H=2");
  b["HV"] = 4;
  b["T"] = 5000;
  EXPECT_FALSE(c.admissible(b, &why));
  EXPECT_EQ(why, "T=5000 is outside [1, 4096]");
  b.erase("T");
  EXPECT_FALSE(c.admissible(b, &why));
  EXPECT_EQ(why, "dim T is not bound");
  EXPECT_THROW(c.inputs[0].resolve(b), std::invalid_argument);
  try {
    c.inputs[0].resolve(b);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("dim T is not bound"), std::string::npos) << e.what();
  }
  b["T"] = 8;
  b["Z"] = 1;
  EXPECT_FALSE(c.admissible(b, &why));
  EXPECT_EQ(why, "Z is not a dim of contract gated_delta");
}

TEST(Contract, MinimalFileTakesTheDocumentedDefaults) {
  const Contract c = parse_contract(R"(
[op]
name = "copy"
[dims.N]
nominal = 8
[[inputs]]
name = "x"
dtype = "f16"
shape = ["N"]
[[outputs]]
name = "y"
dtype = "f16"
shape = ["N"]
)", "min.toml");
  EXPECT_TRUE(c.deterministic);
  EXPECT_EQ(c.working_precision, DType::f32);
  EXPECT_EQ(c.dims[0].min, 8);
  EXPECT_EQ(c.dims[0].max, 8);
  EXPECT_EQ(c.inputs[0].domain.kind, DomainKind::normal);
  EXPECT_DOUBLE_EQ(c.inputs[0].domain.b, 1.0);
  EXPECT_FALSE(c.inputs[0].strided);
  EXPECT_TRUE(c.inputs[0].nonfinite);
  EXPECT_TRUE(c.spread.exact);
  EXPECT_EQ(c.max_case_elements, 1 << 24);
  EXPECT_DOUBLE_EQ(c.timeout_seconds, 10.0);
}

// One malformed file, the line and field its error must name, and a phrase the message must contain.
struct BadCase {
  const char* label;
  const char* text;
  int line;
  const char* field;
  const char* phrase;
};

// Every case is the minimal file below with one thing wrong; the head is lines 1-4.
#define HEAD "[op]\nname = \"t\"\n[dims.N]\nmin = 1\nmax = 64\nnominal = 8\n"  // lines 1-6
#define IN "[[inputs]]\nname = \"x\"\ndtype = \"f32\"\nshape = [\"N\"]\n"     // 4 lines
#define OUT "[[outputs]]\nname = \"y\"\ndtype = \"f32\"\nshape = [\"N\"]\n"   // 4 lines

const BadCase kBadCases[] = {
    {"syntax", HEAD "[[inputs]\n", 7, "", "TOML syntax error"},
    {"missing op", "[dims.N]\nnominal = 1\n" OUT, 1, "op", "missing"},
    {"missing op name", "[op]\ndescription = \"d\"\n" OUT, 1, "op.name", "missing"},
    {"unknown top-level table", HEAD "[limit]\ntimeout = 1\n" IN OUT, 7, "limit", "did you mean 'limits'?"},
    {"typo in a tensor key", HEAD IN "dtyp = \"f32\"\n" OUT, 11, "inputs[0].dtyp", "did you mean 'dtype'?"},
    {"unknown dtype", HEAD "[[inputs]]\nname = \"x\"\ndtype = \"flaot32\"\nshape = [\"N\"]\n" OUT, 9, "inputs[0].dtype",
     "unknown dtype \"flaot32\" (expected one of f64, f32, f16, bf16, i32, i64, bool)"},
    {"dtype of wrong type", HEAD IN OUT "[[outputs]]\nname = \"z\"\ndtype = 32\nshape = [\"N\"]\n", 17,
     "outputs[1].dtype", "expected a string, got integer 32"},
    {"min as a string", "[op]\nname = \"t\"\n[dims.N]\nmin = \"4\"\nmax = 64\nnominal = 8\n" IN OUT, 4, "dims.N.min",
     "expected an integer, got string \"4\""},
    {"min above max", "[op]\nname = \"t\"\n[dims.N]\nmin = 65\nmax = 64\nnominal = 8\n" IN OUT, 4, "dims.N.min",
     "min 65 is greater than max 64"},
    {"nominal outside range", "[op]\nname = \"t\"\n[dims.N]\nmin = 1\nmax = 64\nnominal = 100\n" IN OUT, 6,
     "dims.N.nominal", "nominal 100 is outside [min, max] = [1, 64]"},
    {"nominal off the grid", HEAD "multiple_of = 16\n" IN OUT, 4, "dims.N.min", "min 1 is not a multiple of 16"},
    {"multiple_of an undeclared dim", HEAD "multiple_of = \"H\"\n" IN OUT, 7, "dims.N.multiple_of",
     "dim \"H\" is not declared (declared: N)"},
    {"dim missing nominal", "[op]\nname = \"t\"\n[dims.N]\nmin = 1\nmax = 4\n" IN OUT, 3, "dims.N.nominal", "missing"},
    {"undeclared dim in a shape", HEAD IN OUT "[[outputs]]\nname = \"z\"\ndtype = \"f32\"\nshape = [\"N\", \"M\"]\n", 18,
     "outputs[1].shape[1]", "dim \"M\" is not declared (declared: N)"},
    {"bad shape expression", HEAD "[[inputs]]\nname = \"x\"\ndtype = \"f32\"\nshape = [\"N/2\"]\n" OUT, 10,
     "inputs[0].shape[0]", "\"N/2\": expected a dim name"},
    {"negative literal", HEAD "[[inputs]]\nname = \"x\"\ndtype = \"f32\"\nshape = [-3]\n" OUT, 10,
     "inputs[0].shape[0]", "cannot be negative"},
    {"duplicate tensor name", HEAD IN "[[outputs]]\nname = \"x\"\ndtype = \"f32\"\nshape = [\"N\"]\n", 12,
     "outputs[0].name", "duplicate tensor name \"x\""},
    {"reduced dim no input has", "[op]\nname = \"t\"\n[dims.N]\nnominal = 8\n[dims.K]\nnominal = 4\n" IN OUT
     "reduced = [\"K\"]\n", 15, "outputs[0].reduced[0]", "dim \"K\" appears in no input's shape"},
    {"domain on an output", HEAD IN OUT "domain = \"normal\"\n", 15, "outputs[0].domain", "unknown key"},
    {"unknown domain kind", HEAD IN "domain = \"gaussian\"\n" OUT, 11, "inputs[0].domain",
     "unknown domain kind \"gaussian\" (expected one of normal, uniform, positive, probability, integer, offsets)"},
    {"uniform low above high", HEAD IN "domain = { kind = \"uniform\", low = 2, high = 1 }\n" OUT, 11,
     "inputs[0].domain.low", "low 2 is not below high 1"},
    {"unknown domain key", HEAD IN "domain = { kind = \"normal\", sigma = 2 }\n" OUT, 11, "inputs[0].domain.sigma",
     "unknown key"},
    {"integer input without domain", HEAD "[[inputs]]\nname = \"i\"\ndtype = \"i32\"\nshape = [\"N\"]\n" OUT, 7,
     "inputs[0].domain", "needs domain"},
    {"offsets with a float dtype", HEAD "[[inputs]]\nname = \"o\"\ndtype = \"f32\"\nshape = [\"N+1\"]\n"
     "domain = { kind = \"offsets\", total = \"N\" }\n" OUT, 9, "inputs[0].dtype", "offsets domain needs an integer dtype"},
    {"offsets with an undeclared total", HEAD "[[inputs]]\nname = \"o\"\ndtype = \"i32\"\nshape = [\"N+1\"]\n"
     "domain = { kind = \"offsets\", total = \"T\" }\n" OUT, 11, "inputs[0].domain.total", "dim \"T\" is not declared"},
    {"offsets without total", HEAD "[[inputs]]\nname = \"o\"\ndtype = \"i64\"\nshape = [\"N+1\"]\n"
     "domain = { kind = \"offsets\" }\n" OUT, 11, "inputs[0].domain.total", "missing"},
    {"integer domain out of dtype", HEAD "[[inputs]]\nname = \"i\"\ndtype = \"i32\"\nshape = [\"N\"]\n"
     "domain = { kind = \"integer\", low = 0, high = 3000000000 }\n" OUT, 11, "inputs[0].domain.high", "does not fit in i32"},
    {"spread along an unknown dim", HEAD IN OUT "[nonfinite]\ndim = \"T\"\n", 16, "nonfinite.dim", "dim \"T\" is not declared"},
    {"spread segments not an input", HEAD IN OUT "[nonfinite]\ndim = \"N\"\nsegments = \"cu\"\n", 17, "nonfinite.segments",
     "\"cu\" is not an input (inputs: x)"},
    {"spread block naming no attr", HEAD IN OUT "[nonfinite]\ndim = \"N\"\nblock = \"chunk\"\n", 17, "nonfinite.block",
     "\"chunk\" is not an attr (declared attrs: none)"},
    {"spread oracle with a dim", HEAD IN OUT "[nonfinite]\nspread = \"oracle\"\ndim = \"N\"\n", 17, "nonfinite.dim",
     "allows no extra spread"},
    {"unknown direction", HEAD IN OUT "[nonfinite]\ndim = \"N\"\ndirection = \"sideways\"\n", 17, "nonfinite.direction",
     "unknown direction \"sideways\""},
    {"accumulation on an unknown input", HEAD IN OUT "[[accumulation.inputs]]\ninput = \"w\"\n", 16,
     "accumulation.inputs[0].input", "\"w\" is not an input (inputs: x)"},
    {"accumulation size out of range", HEAD IN OUT "[accumulation.sizes]\nN = 100\n", 16, "accumulation.sizes.N",
     "100 is outside [min, max] = [1, 64]"},
    {"attr that is a string", HEAD "[attrs]\nscale = \"big\"\n" IN OUT, 8, "attrs.scale", "expected a number"},
    {"negative timeout", HEAD IN OUT "[limits]\ntimeout = -1\n", 16, "limits.timeout", "must be from 0.001 to 3600 seconds"},
    {"endless timeout", HEAD IN OUT "[limits]\ntimeout = 1e308\n", 16, "limits.timeout", "must be from 0.001 to 3600 seconds"},
    {"nominal larger than the budget", HEAD IN OUT "[limits]\nmax_case_elements = 4\n", 10, "inputs[0].shape",
     "more than limits.max_case_elements = 4"},
    {"operands of an integer precision", HEAD IN OUT "reduced = [\"N\"]\noperands = { precision = \"i32\", roundings = 2 }\n",
     16, "outputs[0].operands.precision", "must be a float dtype, got i32"},
    {"operands with no rounding", HEAD IN OUT "reduced = [\"N\"]\noperands = { precision = \"bf16\", roundings = 0 }\n",
     16, "outputs[0].operands.roundings", "must be 1 to 1000, got 0"},
    {"operands without roundings", HEAD IN OUT "reduced = [\"N\"]\noperands = { precision = \"bf16\" }\n", 16,
     "outputs[0].operands.roundings", "missing"},
    {"operands key typo", HEAD IN OUT "reduced = [\"N\"]\noperands = { precision = \"bf16\", rounding = 2 }\n", 16,
     "outputs[0].operands.rounding", "did you mean 'roundings'?"},
    {"operands on an output that reduces nothing", HEAD IN OUT "operands = { precision = \"bf16\", roundings = 2 }\n", 15,
     "outputs[0].operands", "the output has no `reduced` dims"},
    {"no outputs", HEAD IN, 1, "outputs", "missing"},
    {"working precision integer", "[op]\nname = \"t\"\nworking_precision = \"i32\"\n" OUT, 3, "op.working_precision",
     "must be a float dtype"},
};

// ctest lists each case by its label rather than by its bytes.
void PrintTo(const BadCase& c, std::ostream* os) { *os << c.label; }

class BadContract : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadContract, NamesFileLineAndField) {
  const BadCase& c = GetParam();
  try {
    parse_contract(c.text, "bad.toml");
    FAIL() << "accepted a contract with: " << c.label;
  } catch (const ContractError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.file(), "bad.toml");
    EXPECT_EQ(e.line(), c.line) << msg;
    EXPECT_GE(e.column(), 1) << msg;
    EXPECT_EQ(e.field(), c.field) << msg;
    const std::string prefix = std::string("bad.toml:") + std::to_string(c.line) + ":" + std::to_string(e.column()) + ": ";
    EXPECT_EQ(msg.rfind(prefix, 0), 0u) << msg;
    if (*c.field) {
      EXPECT_NE(msg.find(std::string("field '") + c.field + "': "), std::string::npos) << msg;
    }
    EXPECT_NE(msg.find(c.phrase), std::string::npos) << msg;
  }
}

INSTANTIATE_TEST_SUITE_P(Table, BadContract, ::testing::ValuesIn(kBadCases), [](const auto& info) {
  std::string n;
  for (const char* p = info.param.label; *p; ++p) n += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
  return n;
});

TEST(Contract, ExactMessageForAnUnknownDtype) {
  try {
    parse_contract(HEAD IN "[[inputs]]\nname = \"w\"\ndtype = \"flaot32\"\nshape = [\"N\"]\n" OUT, "c.toml");
    FAIL();
  } catch (const ContractError& e) {
    EXPECT_STREQ(e.what(),
                 "c.toml:13:9: field 'inputs[1].dtype': unknown dtype \"flaot32\" (expected one of f64, f32, f16, bf16, "
                 "i32, i64, bool)");
  }
}

TEST(Contract, LoadNamesAMissingFile) {
  try {
    load_contract("/nonexistent/kgate/c.toml");
    FAIL();
  } catch (const ContractError& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/kgate/c.toml: cannot open the contract file: No such file or directory");
  }
}

TEST(Contract, LoadReadsAFile) {
  const std::string path = ::testing::TempDir() + "kgate_contract_test.toml";
  std::ofstream(path) << kValid;
  EXPECT_EQ(load_contract(path).path, path);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace kgate

namespace kgate {
namespace {

// The annotated example in docs/contracts.md is a real contract: a change to the schema that breaks it
// breaks this test, so the documentation cannot drift from the reader.
TEST(Contract, DocumentedExampleParses) {
  std::ifstream in(KGATE_DOCS "/contracts.md");
  ASSERT_TRUE(in) << "cannot open docs/contracts.md";
  std::stringstream s;
  s << in.rdbuf();
  const std::string doc = s.str();
  const std::size_t begin = doc.find("```toml\n");
  ASSERT_NE(begin, std::string::npos);
  const std::size_t end = doc.find("```", begin + 8);
  const Contract c = parse_contract(doc.substr(begin + 8, end - begin - 8), "docs/contracts.md");
  EXPECT_EQ(c.name, "gated_delta_fwd");
  EXPECT_EQ(c.inputs.size(), 3u);
  EXPECT_EQ(c.spread.block, 64);
}

}  // namespace
}  // namespace kgate
