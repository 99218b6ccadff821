// kgate/oracle.hpp: the float64 ground truth the gates compare against.
#pragma once

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kgate/contract.hpp"
#include "kgate/target.hpp"
#include "kgate/tensor.hpp"

namespace kgate {

// The oracle failed (crashed, refused, timed out). Never a verdict against the candidate: the gate that
// needed it ends as ERROR with this message.
class OracleError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One run of the operator below float64 on the same inputs, with its outputs as the run left them (any
// dtype; they are compared after widening to f64).
struct ReferenceRun {
  std::string precision;            // "fp32", "tf32", "fp16": a name for the label
  std::vector<HostArray> outputs;   // contract order
};

class Oracle {
 public:
  virtual ~Oracle() = default;
  virtual std::string describe() const = 0;
  // inputs: the contract's inputs in their own dtypes, dense. Returns the contract's outputs in f64
  // (integer outputs as their own dtype), dense, in contract order.
  virtual std::vector<HostArray> evaluate(const std::vector<HostArray>& inputs, const Bindings& bindings,
                                          const Attrs& attrs) = 0;
  // Runs of the operator below float64 on the same inputs, or none. The first is the working precision the
  // candidate promises: its error against evaluate() adds a reference-error term to every tolerance bound
  // (compare.hpp, Tolerance::ref_term) and bounds the oracle gate's magnitude sweep. The others, lower
  // precisions nearest first, only label a tolerance failure with the precision it matches (report.hpp).
  // Throws OracleError like evaluate.
  virtual std::vector<ReferenceRun> reference_runs(const std::vector<HostArray>& inputs, const Bindings& bindings,
                                                   const Attrs& attrs) {
    (void)inputs, (void)bindings, (void)attrs;
    return {};
  }
  virtual bool has_reference_runs() const { return false; }
  // Runs below the working precision fetched apart, only when a failure needs its label: an oracle whose
  // lower-precision runs cost as much as the working one (a model run per precision) returns only the working
  // run from reference_runs() and the lower ones here, nearest first. None by default.
  virtual std::vector<ReferenceRun> label_runs(const std::vector<HostArray>& inputs, const Bindings& bindings,
                                               const Attrs& attrs) {
    (void)inputs, (void)bindings, (void)attrs;
    return {};
  }
};

// An oracle behind a Target (a library exporting kgate_oracle, usually in its own worker process):
// float inputs are widened to f64 before the call.
std::unique_ptr<Oracle> make_target_oracle(std::unique_ptr<Target> target, const Contract& contract);

// An in-process oracle, for tests and front-ends that compute the oracle themselves.
using OracleFn = std::function<std::vector<HostArray>(const std::vector<HostArray>& inputs,
                                                      const Bindings& bindings, const Attrs& attrs)>;
using ReferenceFn = std::function<std::vector<ReferenceRun>(const std::vector<HostArray>& inputs,
                                                             const Bindings& bindings, const Attrs& attrs)>;
// refs may be empty (no reference runs); labels (Oracle::label_runs) may be empty (refs then hold every run).
std::unique_ptr<Oracle> make_function_oracle(std::string name, OracleFn fn, ReferenceFn refs = {},
                                             ReferenceFn labels = {});

}  // namespace kgate
