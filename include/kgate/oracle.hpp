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

class Oracle {
 public:
  virtual ~Oracle() = default;
  virtual std::string describe() const = 0;
  // inputs: the contract's inputs in their own dtypes, dense. Returns the contract's outputs in f64
  // (integer outputs as their own dtype), dense, in contract order.
  virtual std::vector<HostArray> evaluate(const std::vector<HostArray>& inputs, const Bindings& bindings,
                                          const Attrs& attrs) = 0;
};

// An oracle behind a Target (a library exporting kgate_oracle, usually in its own worker process):
// float inputs are widened to f64 before the call.
std::unique_ptr<Oracle> make_target_oracle(std::unique_ptr<Target> target, const Contract& contract);

// An in-process oracle, for tests and front-ends that compute the oracle themselves.
using OracleFn = std::function<std::vector<HostArray>(const std::vector<HostArray>& inputs,
                                                      const Bindings& bindings, const Attrs& attrs)>;
std::unique_ptr<Oracle> make_function_oracle(std::string name, OracleFn fn);

}  // namespace kgate
