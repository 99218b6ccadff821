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
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kgate/compare.hpp"
#include "kgate/contract.hpp"
#include "kgate/inputs.hpp"
#include "kgate/oracle.hpp"
#include "kgate/report.hpp"
#include "kgate/rng.hpp"
#include "kgate/source.hpp"
#include "kgate/structure.hpp"
#include "kgate/target.hpp"
#include "kgate/verify.hpp"

namespace kgate {

struct InputSet {
  Bindings bindings;
  std::uint64_t seed = 0;     // the stream the values came from
  std::string label;          // "nominal set 0", "wide inputs"
  std::vector<HostArray> arrays;  // contract order
  // One of the sets nearly every gate returns to (standard sets 0 and 1 at the nominal bindings): it, its
  // oracle result and its reference runs stay memoised for the whole run (GateContext::standard_inputs).
  bool pinned = false;
  // The memo key of these values (GateContext: a hash of every byte), computed at the first lookup: the
  // oracle, reference and label memos each look a set up, often several times per case, and hashing a large
  // task's set costs a pass over hundreds of MB. A set is never changed once published (InputSetPtr is
  // const); a copy starts without it, so a copy that is changed is hashed again.
  struct KeyCache {
    mutable bool known = false;
    mutable std::uint64_t a = 0, b = 0;  // the hash's state after the arrays
    KeyCache() = default;
    KeyCache(const KeyCache&) {}
    KeyCache& operator=(const KeyCache&) {
      known = false;
      return *this;
    }
  } content_key;
};
using InputSetPtr = std::shared_ptr<const InputSet>;

struct OracleResult {
  // One per contract output: the oracle's values (exact, f64) and their rounding to the output's dtype. The
  // oracle's own arrays are not kept: nothing reads them once these are built, and keeping them held 8 more
  // bytes per output element of every memoised result (a third of the memo; 16 GiB of a100 L2/T34's two).
  std::vector<Reference> refs;
};
using OracleResultPtr = std::shared_ptr<const OracleResult>;

// The oracle's reference runs on one input set, with what the bounds need from each.
struct ReferenceRunResult {
  std::string precision;
  std::vector<HostArray> outputs;   // contract order, as the run returned them
  std::vector<double> error;        // per output: reference_error against the oracle
  // Per output, one byte per element: 0 where the run is finite or the oracle is non-finite, else the run's
  // class there (1 NaN, 2 +Inf, 3 -Inf); empty where every element is 0.
  std::vector<std::vector<std::uint8_t>> nonfinite;
};
struct ReferenceResult {
  std::vector<ReferenceRunResult> runs;  // first: the working precision; empty without reference runs
};
using ReferenceResultPtr = std::shared_ptr<const ReferenceResult>;

// What one case of a gate concluded.
struct CaseOutcome {
  Verdict verdict = Verdict::pass;
  std::optional<Evidence> evidence;  // FAIL (and CRASH/TIMEOUT/ERROR where something is known)
  double error_ratio = std::numeric_limits<double>::quiet_NaN();  // where a bound was applied
  std::string message;               // refusal reason, crash detail, error text
  std::string output;                // what the candidate printed
  std::string finding;               // FAIL: what kind (GateResult::finding)
  bool out_of_domain = false;        // the case's inputs left the structure the source guarantees
  std::string precision_label;       // FAIL of a tolerance judgement: the lower precision it matches
  std::int64_t excused[kExcuseKinds] = {};  // elements not held against the kernel, by Excuse
  void add_excused(const Comparison& c) {
    for (std::size_t k = 0; k < kExcuseKinds; ++k) excused[k] += c.excused[k];
  }
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

// Buffers for one invocation, released when this goes away (unless the target was reset meanwhile). The input
// arrays must outlive it: a dense input's payload is its array's bytes, written from there and not copied.
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
  // The whole payload of input i's buffer as it is now, and as it was written.
  std::vector<std::byte> input_payload(std::size_t i) const;
  std::span<const std::byte> input_payload_written(std::size_t i) const {
    return lent_.at(i) ? lent_[i]->bytes() : std::span<const std::byte>(written_.at(i));
  }
  // The first `bytes` bytes of output i's buffer as it is now (at most its payload).
  std::vector<std::byte> output_prefix(std::size_t i, std::size_t bytes) const;
  // Which tensor a buffer holds ("input x", "output y"), for guard evidence.
  std::string tensor_of(BufferId id, const Contract& c) const;
  const Layout* layout_of(BufferId id) const;

 private:
  void release_all();
  Target& target_;
  Invocation inv_;
  // Input i's payload as written: lent_[i] (the caller's array, dense at offset 0) or else written_[i].
  std::vector<std::vector<std::byte>> written_;
  std::vector<const HostArray*> lent_;
  // An output's buffer holds only its gap fill when placed (Target::fill), so its size is all there is to keep.
  std::vector<std::size_t> out_bytes_;
  std::vector<Placement> in_, out_;
};

class GateContext {
 public:
  // source: where ordinary input sets come from (make_contract_source for the contract's domains).
  GateContext(const Contract& contract, Target& candidate, Oracle& oracle, InputSource& source,
              std::uint64_t run_seed, double tolerance_scale);

  const Contract& contract() const { return contract_; }
  Target& candidate() { return candidate_; }
  std::uint64_t run_seed() const { return run_seed_; }
  double tolerance_scale() const { return tolerance_scale_; }
  const Attrs& attrs() const { return attrs_; }
  // The stream of one gate: every random choice a gate makes derives from it.
  Stream gate_stream(std::string_view gate) const { return Stream(run_seed_).child("gate").child(gate); }

  InputSource& source() { return source_; }
  // Whether the source is the contract's domains (then distributions other than `contract` exist).
  bool contract_domain_source() const { return source_.is_contract_domain(); }
  // An input set drawn from `stream` with distribution d (memoised by stream, distribution and bindings).
  // Distribution::contract asks the source (seed = stream.key()); the others exist only for the contract's
  // own domains (std::invalid_argument otherwise). A source that fails throws SourceError.
  // `pin`: kept for the whole run, past the memo's limit (standard_inputs pins the sets every gate reuses).
  InputSetPtr inputs(const Bindings& b, Stream stream, Distribution d, std::string label, bool pin = false);
  // The standard sets shared by every gate: set k, contract domain. Set 0 is "the nominal set". Sets 0 and 1
  // at the nominal bindings are pinned (InputSet::pinned): oracle, nan, inf, determinism, shapes (its nominal
  // rms floor), immutability, coverage, bounds, freshness, stream and layout all run on them, and on a large
  // task one memo entry passes the byte limit alone, so the LRU alone evaluated them again gate after gate.
  // KGATE_MEMO_PIN=0 turns it off (to measure what it saves).
  InputSetPtr standard_inputs(const Bindings& b, int k);
  Stream standard_stream(int k) const { return Stream(run_seed_).child("inputs").child(static_cast<std::uint64_t>(k)); }
  // A set made by hand (injected values, accumulation patterns): not memoised as a draw, but the oracle of
  // its values still is.
  InputSetPtr custom_inputs(const Bindings& b, std::uint64_t seed, std::string label, std::vector<HostArray> arrays);

  // The structure every draw of the source shares at b, per input (inferred from standard sets 0..3;
  // memoised by bindings). Throws SourceError.
  const std::vector<InputStructure>& structure(const Bindings& b);
  // Why a perturbed input set leaves that structure at its bindings ("input x: nan at [0, 3], a structural
  // zero"), or empty.
  std::string out_of_domain(const InputSet& perturbed);

  // The oracle's outputs for these inputs, memoised by content. Throws OracleError.
  OracleResultPtr oracle(const InputSet& inputs);
  // The oracle's reference runs on these inputs (empty runs when it has none), memoised by content.
  ReferenceResultPtr references(const InputSet& inputs, const OracleResult& oracle);
  // The same with the oracle's label runs (Oracle::label_runs) after the working run: what a failure's precision
  // label is chosen from. Fetched only when asked, memoised by content.
  ReferenceResultPtr labelled_references(const InputSet& inputs, const OracleResult& oracle);
  bool has_reference_runs() const { return oracle_.has_reference_runs(); }

  // The per-element bounds of every output at bindings b.
  // The default bound per output at these bindings (see Tolerance::rms_floor for small outputs).
  std::vector<Tolerance> tolerances(const Bindings& b);

  // Dense placement of every tensor at b, optionally at `offset` elements into its buffer.
  std::vector<Placement> dense_inputs(const Bindings& b, std::int64_t offset = 0) const;
  std::vector<Placement> dense_outputs(const Bindings& b, std::int64_t offset = 0) const;

  // Every candidate call goes through here (gates/common.cpp call_once, the stream gate): guard violations
  // in candidate-owned memory are recorded with the gate that saw them, for the bounds gate.
  CallResult call(const CallRequest& request);
  struct SeenGuard {
    GuardViolation violation;
    std::string gate;
  };
  const std::vector<SeenGuard>& candidate_owned_violations() const { return candidate_owned_; }
  void set_current_gate(std::string gate) { current_gate_ = std::move(gate); }

  // Cheap statistics for the report: what a run spent where (verify.cpp takes each gate's share as the
  // difference across it). The oracle's memo hits are evaluations a gate did not pay for; a miss is one
  // float64 Model run (on torch: a GPU run of the task's Model and a copy of its outputs to the host).
  struct Counters {
    int candidate_calls = 0;        // calls issued to the candidate (each a worker round trip)
    double candidate_seconds = 0;   // wall time inside those calls
    int oracle_evaluations = 0;     // float64 oracle runs (memo misses)
    int oracle_reuses = 0;          // oracle lookups answered by the memo
    int reference_evaluations = 0;  // working-precision reference runs (memo misses)
    int label_evaluations = 0;      // lower-precision label runs (fetched only for a failure's label)
    double oracle_seconds = 0;      // wall time in the oracle, its reference and label runs and their judging
    int input_draws = 0;            // input sets drawn from the source (memo misses)
    double draw_seconds = 0;        // wall time drawing them
  };
  const Counters& counters() const { return counters_; }
  int oracle_evaluations() const { return counters_.oracle_evaluations; }

 private:
  const Contract& contract_;
  Target& candidate_;
  Oracle& oracle_;
  InputSource& source_;
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
    std::size_t keep = 1;  // the most recent unpinned entries kept whatever their size (see kgate::memo_keep)
    std::set<std::string> pinned;  // never evicted (InputSet::pinned)
    const V* find(const std::string& key);
    void put(const std::string& key, V value, std::size_t bytes, bool pin = false);
  };
  Cache<InputSetPtr> input_cache_;
  Cache<OracleResultPtr> oracle_cache_;
  Cache<ReferenceResultPtr> reference_cache_;
  Cache<ReferenceResultPtr> label_cache_;
  std::map<Bindings, std::vector<InputStructure>> structures_;
  std::vector<SeenGuard> candidate_owned_;
  std::string current_gate_;
  Counters counters_;
};

}  // namespace kgate
