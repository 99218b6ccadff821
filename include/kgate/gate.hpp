// kgate/gate.hpp: what a gate is, and the context every gate runs in.
//
// A gate is a list of cases. A case is a closure over its own parameters (seed, distribution, which input
// to poison...) that can run at any admissible bindings: that is what lets the verify loop shrink any
// failing case of any gate generically, by re-running it at smaller shapes with the same seed and variant.
//
// The context owns what gates share: the run's seed, memoised input sets and memoised oracle outputs (most
// gates reuse the nominal set, and the oracle is usually the slowest thing in a run), and the candidate
// helpers that place tensors in target buffers and call it.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kgate/compare.hpp"
#include "kgate/contract.hpp"
#include "kgate/inputs.hpp"
#include "kgate/oracle.hpp"
#include "kgate/report.hpp"
#include "kgate/rng.hpp"
#include "kgate/target.hpp"
#include "kgate/verify.hpp"

namespace kgate {

struct InputSet {
  Bindings bindings;
  std::uint64_t seed = 0;     // the stream the values came from
  std::string label;          // "nominal set 0", "wide inputs"
  std::vector<HostArray> arrays;  // contract order
};
using InputSetPtr = std::shared_ptr<const InputSet>;

struct OracleResult {
  std::vector<HostArray> outputs;   // as the oracle returned them
  std::vector<Reference> refs;      // one per contract output, rounded to the output's dtype
};
using OracleResultPtr = std::shared_ptr<const OracleResult>;

// What one case of a gate concluded.
struct CaseOutcome {
  Verdict verdict = Verdict::pass;
  std::optional<Evidence> evidence;  // FAIL (and CRASH/TIMEOUT/ERROR where something is known)
  double error_ratio = std::numeric_limits<double>::quiet_NaN();  // where a bound was applied
  std::string message;               // refusal reason, crash detail, error text
  std::string output;                // what the candidate printed
};

// Who a case is, for evidence.
struct CaseInfo {
  std::string gate;
  std::uint64_t seed = 0;
  Bindings bindings;
  std::string variant;
  Evidence evidence() const;  // gate, seed, bindings, variant filled in
};

class GateContext;

struct GateCase {
  std::string label;   // "wide inputs, seed 1"
  Bindings bindings;   // where the gate runs it
  std::uint64_t seed = 0;
  bool shrinkable = true;
  std::function<CaseOutcome(GateContext& ctx, const CaseInfo& info)> run;
};

class Gate {
 public:
  virtual ~Gate() = default;
  virtual GateInfo info() const = 0;
  // Why the gate does not apply to this contract, if it does not.
  virtual std::optional<std::string> skip_reason(const GateContext&) const { return std::nullopt; }
  virtual std::vector<GateCase> cases(GateContext& ctx) = 0;
};

// The gates in DESIGN.md order, then baseline.
const std::vector<std::unique_ptr<Gate>>& registered_gates();

// Where one tensor goes in its buffer: a layout (offset and strides in elements) and the byte that fills
// everything in the buffer that is not an element of the tensor.
struct Placement {
  Layout layout;
  std::byte gap_fill{0};
};

// Buffers for one invocation, released when this goes away (unless the target was reset meanwhile).
class PlacedCall {
 public:
  PlacedCall(Target& t, const std::vector<HostArray>& inputs, const std::vector<Placement>& in,
             const std::vector<Placement>& out, const Attrs& attrs);
  PlacedCall(const PlacedCall&) = delete;
  PlacedCall& operator=(const PlacedCall&) = delete;
  ~PlacedCall();
  const Invocation& invocation() const { return inv_; }
  // Rewrites input i's elements (same layout) in place, for the freshness gate.
  void rewrite_input(std::size_t i, const HostArray& values);
  // Moves every tensor to `offset_bytes` into its buffer (which must have room: place at the larger offset
  // first), rewriting inputs and refilling gaps; for the determinism gate, whose runs must differ in address
  // bits a fresh allocation might happen to share.
  void move_to(std::size_t offset_bytes, const std::vector<HostArray>& inputs);
  // The whole payload of input i's / output i's buffer as it is now.
  std::vector<std::byte> input_payload(std::size_t i) const;
  std::vector<std::byte> output_payload(std::size_t i) const;
  const std::vector<std::byte>& input_payload_written(std::size_t i) const { return written_[i]; }
  const std::vector<std::byte>& output_payload_written(std::size_t i) const { return out_written_[i]; }
  // Which tensor a buffer holds ("input x", "output y"), for guard evidence.
  std::string tensor_of(BufferId id, const Contract& c) const;
  const Layout* layout_of(BufferId id) const;

 private:
  void release_all();
  Target& target_;
  Invocation inv_;
  std::vector<std::vector<std::byte>> written_, out_written_;
  std::vector<Placement> in_, out_;
};

class GateContext {
 public:
  GateContext(const Contract& contract, Target& candidate, Oracle& oracle, std::uint64_t run_seed,
              double tolerance_scale);

  const Contract& contract() const { return contract_; }
  Target& candidate() { return candidate_; }
  std::uint64_t run_seed() const { return run_seed_; }
  double tolerance_scale() const { return tolerance_scale_; }
  const Attrs& attrs() const { return attrs_; }
  // The stream of one gate: every random choice a gate makes derives from it.
  Stream gate_stream(std::string_view gate) const { return Stream(run_seed_).child("gate").child(gate); }

  // An input set drawn from `stream` with distribution d (memoised by stream, distribution and bindings).
  InputSetPtr inputs(const Bindings& b, Stream stream, Distribution d, std::string label);
  // The standard sets shared by every gate: set k, contract domain. Set 0 is "the nominal set".
  InputSetPtr standard_inputs(const Bindings& b, int k);
  Stream standard_stream(int k) const { return Stream(run_seed_).child("inputs").child(static_cast<std::uint64_t>(k)); }
  // A set made by hand (injected values, accumulation patterns): not memoised as a draw, but the oracle of
  // its values still is.
  InputSetPtr custom_inputs(const Bindings& b, std::uint64_t seed, std::string label, std::vector<HostArray> arrays);

  // The oracle's outputs for these inputs, memoised by content. Throws OracleError.
  OracleResultPtr oracle(const InputSet& inputs);

  // The per-element bounds of every output at bindings b.
  // The default bound per output at these bindings (see Tolerance::rms_floor for small outputs).
  std::vector<Tolerance> tolerances(const Bindings& b);

  // Dense placement of every tensor at b, optionally at `offset` elements into its buffer.
  std::vector<Placement> dense_inputs(const Bindings& b, std::int64_t offset = 0) const;
  std::vector<Placement> dense_outputs(const Bindings& b, std::int64_t offset = 0) const;

  // Cheap statistics for the report.
  int oracle_evaluations() const { return oracle_evaluations_; }

 private:
  const Contract& contract_;
  Target& candidate_;
  Oracle& oracle_;
  std::uint64_t run_seed_;
  double tolerance_scale_;
  Attrs attrs_;

  // Bounded caches: an LRU list of keys with the total bytes they hold.
  template <class V>
  struct Cache {
    std::map<std::string, std::pair<V, std::size_t>> items;
    std::list<std::string> order;  // most recent first
    std::size_t bytes = 0;
    std::size_t limit = 0;
    const V* find(const std::string& key);
    void put(const std::string& key, V value, std::size_t bytes);
  };
  Cache<InputSetPtr> input_cache_;
  Cache<OracleResultPtr> oracle_cache_;
  int oracle_evaluations_ = 0;
};

}  // namespace kgate
