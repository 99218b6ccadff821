// kgate/source.hpp: where the values of every ordinary input set come from.
//
// The gates ask the GateContext for input sets; the context asks the run's InputSource. The default source
// draws from the contract's declared domains (kgate/inputs.hpp); a front-end may supply its own (KernelBench:
// the task's own get_inputs()). Perturbations (injected NaN/Inf, accumulation patterns, magnitude sweeps,
// coverage special values, freshness variants) are made by the gates from these draws, never by the source.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kgate/contract.hpp"
#include "kgate/tensor.hpp"

namespace kgate {

// The source could not draw (it raised, or returned arrays that do not fit the contract). Never a verdict
// against the candidate: the gate that needed the draw ends as ERROR with this message.
class SourceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class InputSource {
 public:
  virtual ~InputSource() = default;
  virtual std::string describe() const = 0;
  // Every input of the contract at bindings b, in contract order, each in its contract dtype and shape.
  // Every value must be a pure function of (b, seed): one printed seed reproduces every gate.
  virtual std::vector<HostArray> draw(const Bindings& b, std::uint64_t seed) = 0;
  // Whether this is the contract's own domains (the oracle gate then also varies the distribution).
  virtual bool is_contract_domain() const { return false; }
};

// The default: each input from its contract domain, input i from Stream(seed).child(input name).
std::unique_ptr<InputSource> make_contract_source(const Contract& c);

// Checks a draw against the contract at b (count, dtype, shape); throws SourceError naming the input.
void check_draw(const Contract& c, const Bindings& b, const std::vector<HostArray>& arrays, const std::string& who);

}  // namespace kgate
