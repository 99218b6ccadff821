// kgate/contract.hpp: what an operator promises, read from a TOML contract file.
//
// The schema is documented in docs/contracts.md; every field below names its TOML key. A malformed or
// contradictory file raises ContractError naming the file, line, column and field.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kgate/dtype.hpp"
#include "kgate/tensor.hpp"

namespace kgate {

class ContractError : public std::runtime_error {
 public:
  ContractError(std::string file, int line, int column, std::string field, const std::string& what);
  const std::string& file() const { return file_; }
  int line() const { return line_; }
  int column() const { return column_; }
  const std::string& field() const { return field_; }

 private:
  std::string file_;
  int line_, column_;
  std::string field_;
};

// [dims.NAME]: a symbolic dimension.
struct DimSpec {
  std::string name;
  std::int64_t min = 1;         // min
  std::int64_t max = 1;         // max
  std::int64_t nominal = 1;     // nominal: the one shape the field's standard test uses
  std::int64_t multiple_of = 1;       // multiple_of = 16: every value is a multiple of this
  std::string multiple_of_dim;        // multiple_of = "H": every value is a multiple of dim H's value
  std::int64_t large = 0;       // large: the size the shapes gate uses as "large" (default: max, capped by budget)
};

// How an input's values are drawn (domain = "normal" or domain = { kind = "uniform", low = -1, high = 1 }).
enum class DomainKind {
  normal,       // mean, std (default 0, 1)
  uniform,      // low, high (default -1, 1)
  positive,     // uniform in [low, high) with 0 < low (default 0.5, 2)
  probability,  // uniform in [0, 1]
  integer,      // integers in [low, high]
  offsets,      // monotone segment offsets: shape [N+1], values 0 = o_0 <= ... <= o_N = dim `total`
                // (segment lengths random, empty segments included); integer dtype
};
struct Domain {
  DomainKind kind = DomainKind::normal;
  double a = 0.0;          // mean or low
  double b = 1.0;          // std or high
  std::string total;       // offsets: the dim the offsets sum to
  bool allow_empty = true; // offsets: whether zero-length segments may be drawn
};

// [[inputs]] and [[outputs]].
struct TensorSpec {
  std::string name;                 // name
  DType dtype = DType::f32;         // dtype
  std::vector<std::string> shape;   // shape = ["M", "N", 4]: dim names or integer literals
  Domain domain;                    // domain (inputs only)
  bool strided = false;             // layout = "strided": the kernel accepts any strides (layout gate
                                    // tries non-contiguous views); default "contiguous"
  bool nonfinite = true;            // nonfinite = false: never inject NaN/Inf here (e.g. integer offsets)
  bool overflow = true;             // overflow = false: never inject near-max values here
  std::vector<std::string> reduced; // reduced = ["K"] (outputs): dims summed over to make this output
  // Tolerance overrides (outputs): [outputs.tolerance] rtol, atol, atol_rms, scale. Absent fields keep the
  // bound derived from dtypes and reduced sizes.
  std::optional<double> rtol, atol, atol_rms;
  double tolerance_scale = 1.0;
  // operands = { precision = "bf16", roundings = 2 } (outputs): the kernel rounds the operands of the products
  // that make this output to `precision` (tensor-core operands), each term passing through at most `roundings`
  // such roundings before it is summed. Only the accumulation gate's bound uses it; absent, operands are exact.
  struct OperandRounding {
    DType precision = DType::f32;
    int roundings = 0;
  };
  std::optional<OperandRounding> operands;

  Shape resolve(const Bindings& b) const;  // throws std::invalid_argument naming an unbound dim
};

// [nonfinite]: how far a NaN or Inf in an input may spread beyond what the float64 oracle says.
struct SpreadRule {
  bool exact = true;              // spread = "oracle" (default): exactly the oracle's non-finite set;
                                  // spread = "along" (implied by dim): extra spread along `dim`
  std::string dim;                // dim = "T": the axis along which extra spread is allowed
  std::int64_t block = 0;         // block = 64, or block = "chunk" naming an attr
  std::string block_attr;         // the attr `block` named, if any (block then holds its value)
  std::string segments;           // segments = "cu_seqlens": an offsets input; blocks restart at segment
                                  // starts and nothing spreads across segment boundaries
  enum class Direction { forward, backward, both } direction = Direction::forward;  // direction
  bool inf_may_become_nan = false;  // inf_may_become_nan = true: an oracle Inf may come out NaN
  // Outputs without `dim` (e.g. a final state per sequence) follow the oracle exactly.
};

// [accumulation]: inputs shaped so low-precision accumulation fails grossly.
struct AccumulationInput {
  std::string input;
  enum class Pattern { constant, positive } pattern = Pattern::constant;  // pattern
  double value = 1.0;  // value: the constant, or the upper end of the positive range [value/2, value]
};
struct AccumulationSpec {
  std::vector<AccumulationInput> inputs;  // [[accumulation.inputs]]; default: every float input constant 1
  Bindings sizes;                         // [accumulation.sizes]: dims to set (default: reduced dims at max)
};

struct Contract {
  std::string path;                    // the file it came from
  std::string name;                    // [op] name
  std::string description;             // [op] description
  DType working_precision = DType::f32;  // [op] working_precision
  bool deterministic = true;           // [op] deterministic
  std::vector<DimSpec> dims;           // [dims.*], file order
  std::vector<TensorSpec> inputs;      // [[inputs]]
  std::vector<TensorSpec> outputs;     // [[outputs]]
  std::vector<std::pair<std::string, double>> attrs;  // [attrs], file order
  SpreadRule spread;                   // [nonfinite]
  AccumulationSpec accumulation;       // [accumulation]
  std::int64_t max_case_elements = 1 << 24;  // [limits] max_case_elements: largest tensor any gate makes
  double timeout_seconds = 10.0;       // [limits] timeout: per candidate call

  const DimSpec* dim(const std::string& name) const;
  Bindings nominal() const;
  double attr(const std::string& name, double fallback) const;
  // Whether b satisfies every range and multiple_of constraint; if not and why is non-null, says which.
  bool admissible(const Bindings& b, std::string* why = nullptr) const;
};

// The memory one case of a gate may take (in case_bytes' estimate), and where that number comes from.
// Not a constant: a 141 GB machine must hold the nominal case of a task that ran on an 80 GB one.
struct CaseMemoryLimit {
  std::int64_t bytes = 0;
  std::string why;  // "3/4 of this machine's 125.8 GiB (MemTotal)", "KGATE_CASE_MEMORY", "the audit's share ..."
};
// KGATE_CASE_MEMORY (bytes, a decimal integer >= 1 MiB) where set, else 3/4 of this machine's memory (MemTotal,
// or the memory cgroup's limit where lower). A bad KGATE_CASE_MEMORY throws ContractError (one line, no file).
CaseMemoryLimit case_memory_limit();
// What one case is estimated to hold on the judge's side, per element of every input and output, each tensor
// capped at max_case_elements (the gates halve larger ones): the tensor in its dtype and its float64 copy, each
// twice (the engine's array and the target's; the oracle's f64 output and the bound's copy of it).
std::int64_t case_bytes_per_element(DType t);
// That estimate at bindings b (saturates at INT64_MAX), and at every dim's max (the largest case any gate makes).
std::int64_t case_bytes(const Contract& c, const Bindings& b);
std::int64_t largest_case_bytes(const Contract& c);

// Parse and check a contract file. Throws ContractError. The largest case must fit case_memory_limit().
Contract load_contract(const std::string& path);
// Parse from text (path used only in messages).
Contract parse_contract(const std::string& text, const std::string& path);
// The same against a given limit (bytes <= 0: no memory check, for a caller that measures the case itself).
Contract parse_contract(const std::string& text, const std::string& path, const CaseMemoryLimit& limit);

}  // namespace kgate
