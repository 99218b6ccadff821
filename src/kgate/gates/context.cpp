// The context gates share: memoised input sets and oracle outputs, bounds, and tensor placement.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "kgate/gate.hpp"
#include "kgate/parallel.hpp"

namespace kgate {
namespace {

constexpr std::size_t kOracleCacheBytes = std::size_t{512} << 20;  // the input memo gets half, labels a quarter

// A 128-bit content hash (two independent 64-bit lanes): the oracle memo is keyed by what the oracle would
// see, so any gate that happens to build the same values reuses the same evaluation.
struct Hash128 {
  std::uint64_t a = 0x243f6a8885a308d3ull, b = 0x13198a2e03707344ull;
  void add(std::uint64_t w) {
    a = mix64(a ^ w);
    b = (b ^ w) * 0x9e3779b97f4a7c15ull;
    b = (b << 29) | (b >> 35);
  }
  void add_bytes(const std::byte* p, std::size_t n) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      std::uint64_t w;
      std::memcpy(&w, p + i, 8);
      add(w);
    }
    std::uint64_t tail = 0;
    std::memcpy(&tail, p + i, n - i);
    add(tail ^ (static_cast<std::uint64_t>(n) << 56));
  }
};

std::string content_key(const InputSet& s, const Attrs& attrs) {
  Hash128 h;
  if (s.content_key.known) {  // the arrays' part, hashed at the set's first lookup
    h.a = s.content_key.a;
    h.b = s.content_key.b;
  } else {
    for (const HostArray& a : s.arrays) {
      h.add(static_cast<std::uint64_t>(a.dtype()));
      for (std::int64_t d : a.shape()) h.add(static_cast<std::uint64_t>(d));
      // The bytes in fixed chunks of 8 * kParallelChunk, hashed on the host's threads, their digests folded
      // in order: the key does not depend on the thread count (and is only ever a memo key).
      const std::size_t bytes = a.nbytes();
      const std::int64_t words = static_cast<std::int64_t>((bytes + 7) / 8);
      std::vector<Hash128> parts(static_cast<std::size_t>(chunk_count(words)));
      parallel_chunks(words, [&](std::int64_t chunk, std::int64_t begin, std::int64_t end) {
        const std::size_t from = static_cast<std::size_t>(begin) * 8;
        const std::size_t to = std::min(bytes, static_cast<std::size_t>(end) * 8);
        parts[static_cast<std::size_t>(chunk)].add_bytes(a.data() + from, to - from);
      });
      for (const Hash128& part : parts) {
        h.add(part.a);
        h.add(part.b);
      }
    }
    s.content_key.a = h.a;
    s.content_key.b = h.b;
    s.content_key.known = true;
  }
  for (const auto& [name, v] : attrs) {
    std::uint64_t w;
    std::memcpy(&w, &v, 8);
    h.add(w);
  }
  return fmt::format("{}|{:016x}{:016x}", to_string(s.bindings), h.a, h.b);
}

// Whether the nominal standard sets 0 and 1 stay memoised for the whole run (GateContext::standard_inputs);
// KGATE_MEMO_PIN=0 turns it off, to measure what it saves.
bool memo_pin() {
  static const bool pin = [] {
    const char* env = std::getenv("KGATE_MEMO_PIN");
    return !(env && std::string_view(env) == "0");
  }();
  return pin;
}
constexpr int kPinnedSets = 2;

// How many of the most recent unpinned entries a memo keeps even past its byte limit. One entry of a large
// task (an oracle output and its two float64 references) can pass the limit alone; keeping only the newest
// made the oracle gate's sweep evaluate the unscaled set's oracle and reference runs again for every factor (it
// alternates between the unscaled and the scaled set). That set is standard set 0, pinned now (memo_pin), so
// one is enough; without pinning (KGATE_MEMO_PIN=0) two keep the set a gate returns to. KGATE_MEMO_KEEP (>= 1)
// trades that back for memory: 12 rows at once each hold up to this many entries per memo, plus the pinned.
std::size_t memo_keep() {
  static const std::size_t keep = [] {
    const char* env = std::getenv("KGATE_MEMO_KEEP");
    const long v = env && *env ? std::strtol(env, nullptr, 10) : memo_pin() ? 1 : 2;
    return static_cast<std::size_t>(std::max(v, 1L));
  }();
  return keep;
}

// Adds the wall time of a scope to a counter (GateContext::Counters).
class Timed {
 public:
  explicit Timed(double& sum) : sum_(sum), t0_(std::chrono::steady_clock::now()) {}
  ~Timed() { sum_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }
  Timed(const Timed&) = delete;
  Timed& operator=(const Timed&) = delete;

 private:
  double& sum_;
  std::chrono::steady_clock::time_point t0_;
};

// The oracle and reference memos' byte limit: kOracleCacheBytes, or KGATE_MEMO_BYTES. A small task's whole run
// fits; one output of a large task (16 bytes an element memoised: 32M elements) passes it alone, and then only
// the pinned sets and the `keep` most recent entries stay. Tests set it low to run a small task as a large one.
std::size_t memo_bytes() {
  static const std::size_t bytes = [] {
    const char* env = std::getenv("KGATE_MEMO_BYTES");
    const long long v = env && *env ? std::strtoll(env, nullptr, 10) : 0;
    return v > 0 ? static_cast<std::size_t>(v) : kOracleCacheBytes;
  }();
  return bytes;
}


std::size_t bytes_of(const std::vector<HostArray>& v) {
  std::size_t n = 0;
  for (const HostArray& a : v) n += a.nbytes();
  return n;
}

}  // namespace

Evidence CaseInfo::evidence() const {
  Evidence e;
  e.gate = gate;
  e.seed = seed;
  e.bindings = bindings;
  e.variant = variant;
  return e;
}

template <class V>
const V* GateContext::Cache<V>::find(const std::string& key) {
  auto it = items.find(key);
  if (it == items.end()) return nullptr;
  order.remove(key);
  order.push_front(key);
  return &it->second.first;
}

template <class V>
void GateContext::Cache<V>::put(const std::string& key, V value, std::size_t size, bool pin) {
  if (auto it = items.find(key); it != items.end()) {
    if (pin && pinned.insert(key).second) bytes -= it->second.second;  // now outside the limit
    return;
  }
  items.emplace(key, std::make_pair(std::move(value), size));
  order.push_front(key);
  if (pin) {
    pinned.insert(key);
    return;
  }
  // Pinned entries are outside the limit: the others keep the whole limit, as they had before pinning, so
  // a large pinned set never crowds small entries (a shrunk case's shapes) out.
  bytes += size;
  std::size_t unpinned = order.size() - pinned.size();
  for (auto it = order.end(); bytes > limit && unpinned > keep && it != order.begin();) {
    --it;
    if (pinned.count(*it)) continue;
    bytes -= items[*it].second;
    items.erase(*it);
    it = order.erase(it);
    --unpinned;
  }
}

GateContext::GateContext(const Contract& contract, Target& candidate, Oracle& oracle, InputSource& source,
                         std::uint64_t run_seed, double tolerance_scale)
    : contract_(contract),
      candidate_(candidate),
      oracle_(oracle),
      source_(source),
      run_seed_(run_seed),
      tolerance_scale_(tolerance_scale),
      attrs_(contract.attrs) {
  const std::size_t oracle_bytes = memo_bytes();
  input_cache_.limit = oracle_bytes / 2;
  oracle_cache_.limit = oracle_bytes;
  reference_cache_.limit = oracle_bytes;
  label_cache_.limit = oracle_bytes / 4;
  input_cache_.keep = oracle_cache_.keep = reference_cache_.keep = memo_keep();
}

InputSetPtr GateContext::inputs(const Bindings& b, Stream stream, Distribution d, std::string label, bool pin) {
  const std::string key = fmt::format("{:016x}|{}|{}", stream.key(), to_string(d), to_string(b));
  if (const InputSetPtr* hit = input_cache_.find(key)) return *hit;
  ++counters_.input_draws;
  Timed timed(counters_.draw_seconds);
  auto set = std::make_shared<InputSet>();
  set->bindings = b;
  set->seed = stream.key();
  set->label = std::move(label);
  set->pinned = pin;
  if (d == Distribution::contract) {
    try {
      set->arrays = source_.draw(b, stream.key());
    } catch (const SourceError&) {
      throw;
    } catch (const std::exception& e) {
      throw SourceError(fmt::format("input source {} failed to draw at {} (seed {}): {}", source_.describe(),
                                    to_string(b), stream.key(), e.what()));
    }
    check_draw(contract_, b, set->arrays, "input source " + source_.describe());
  } else {
    if (!source_.is_contract_domain())
      throw std::invalid_argument(fmt::format("distribution {} exists only for the contract's domains", to_string(d)));
    set->arrays = generate_inputs(contract_, b, stream, d);
  }
  const std::size_t bytes = bytes_of(set->arrays);
  InputSetPtr ptr = set;
  input_cache_.put(key, ptr, bytes, pin);
  return ptr;
}

InputSetPtr GateContext::standard_inputs(const Bindings& b, int k) {
  const bool pin = memo_pin() && k < kPinnedSets && b == contract_.nominal();
  return inputs(b, standard_stream(k), Distribution::contract, fmt::format("standard set {}", k), pin);
}

InputSetPtr GateContext::custom_inputs(const Bindings& b, std::uint64_t seed, std::string label,
                                       std::vector<HostArray> arrays) {
  auto set = std::make_shared<InputSet>();
  set->bindings = b;
  set->seed = seed;
  set->label = std::move(label);
  set->arrays = std::move(arrays);
  return set;
}

OracleResultPtr GateContext::oracle(const InputSet& in) {
  const std::string key = content_key(in, attrs_);
  if (const OracleResultPtr* hit = oracle_cache_.find(key)) {
    ++counters_.oracle_reuses;
    return *hit;
  }
  ++counters_.oracle_evaluations;
  Timed timed(counters_.oracle_seconds);
  auto res = std::make_shared<OracleResult>();
  std::vector<HostArray> outputs = oracle_.evaluate(in.arrays, in.bindings, attrs_);
  if (outputs.size() != contract_.outputs.size())
    throw OracleError(fmt::format("oracle {} returned {} outputs; contract {} has {}", oracle_.describe(),
                                  outputs.size(), contract_.name, contract_.outputs.size()));
  for (std::size_t o = 0; o < contract_.outputs.size(); ++o) {
    const TensorSpec& spec = contract_.outputs[o];
    const Shape want = spec.resolve(in.bindings);
    if (outputs[o].shape() != want)
      throw OracleError(fmt::format("oracle {} returned output {} with shape {}; the contract says {} at {}",
                                    oracle_.describe(), spec.name, shape_string(outputs[o].shape()),
                                    shape_string(want), to_string(in.bindings)));
  }
  for (std::size_t o = 0; o < contract_.outputs.size(); ++o) {
    res->refs.push_back(make_reference(outputs[o], contract_.outputs[o].dtype));
    outputs[o] = HostArray();  // its values are in refs[o].exact: let go of it before the next one is decoded
  }
  std::size_t bytes = 0;
  for (const Reference& r : res->refs) bytes += 2 * r.exact.size() * sizeof(double);
  OracleResultPtr ptr = res;
  oracle_cache_.put(key, ptr, bytes, in.pinned);
  return ptr;
}

CallResult GateContext::call(const CallRequest& request) {
  ++counters_.candidate_calls;
  Timed timed(counters_.candidate_seconds);
  CallResult r = candidate_.call(request);
  for (const GuardViolation& g : r.guards)
    if (g.buffer == kCandidateOwnedBuffer) candidate_owned_.push_back({g, current_gate_});
  return r;
}

const std::vector<InputStructure>& GateContext::structure(const Bindings& b) {
  constexpr int kStructureDraws = 4;
  if (auto it = structures_.find(b); it != structures_.end()) return it->second;
  std::vector<InputSetPtr> sets;
  for (int k = 0; k < kStructureDraws; ++k) sets.push_back(standard_inputs(b, k));
  std::vector<InputStructure> out;
  for (std::size_t i = 0; i < contract_.inputs.size(); ++i) {
    std::vector<const HostArray*> draws;
    for (const InputSetPtr& s : sets) draws.push_back(&s->arrays[i]);
    out.push_back(infer_structure(draws));
  }
  return structures_.emplace(b, std::move(out)).first->second;
}

std::string GateContext::out_of_domain(const InputSet& perturbed) {
  const std::vector<InputStructure>& st = structure(perturbed.bindings);
  for (std::size_t i = 0; i < st.size() && i < perturbed.arrays.size(); ++i) {
    const std::string why = structure_violation(st[i], perturbed.arrays[i]);
    if (!why.empty())
      return fmt::format("input {}: {} (its source's draws are: {})", contract_.inputs[i].name, why, describe(st[i]));
  }
  return {};
}

namespace {

// One reference run against the oracle: its error per output and where it is non-finite and the oracle is not.
ReferenceRunResult judge_reference_run(ReferenceRun& run, const OracleResult& oracle, const Contract& contract,
                                       std::size_t& bytes) {
  if (run.outputs.size() != contract.outputs.size())
    throw OracleError(fmt::format("reference run {} returned {} outputs; contract {} has {}", run.precision,
                                  run.outputs.size(), contract.name, contract.outputs.size()));
  ReferenceRunResult r;
  r.precision = run.precision;
  for (std::size_t o = 0; o < run.outputs.size(); ++o) {
    const Reference& ref = oracle.refs.at(o);
    if (run.outputs[o].shape() != ref.shape)
      throw OracleError(fmt::format("reference run {} returned output {} with shape {}; the oracle's is {}",
                                    run.precision, contract.outputs[o].name, shape_string(run.outputs[o].shape()),
                                    shape_string(ref.shape)));
    // One pass over the run, decoded a block at a time (a float64 copy of a large output is hundreds of MB):
    // its error (reference_error: the largest |run - oracle| where both are finite) and its non-finite
    // classes, kept only where there is one (an empty vector: finite wherever the oracle is).
    const HostArray& out = run.outputs[o];
    const std::int64_t n = out.numel();
    if (static_cast<std::size_t>(n) != ref.exact.size())
      throw std::invalid_argument(fmt::format("reference run output has {} elements; the oracle's has {}", n,
                                              ref.exact.size()));
    // Fixed chunks on the host's threads (parallel.hpp): the largest error is exact in any order, and the
    // classes are written per element, so the result does not depend on the thread count.
    constexpr std::int64_t kBlock = 4096;
    std::vector<double> chunk_worst(static_cast<std::size_t>(chunk_count(n)), 0.0);
    std::vector<std::uint8_t> chunk_nonfinite(chunk_worst.size(), 0);
    std::vector<std::uint8_t> all_cls(static_cast<std::size_t>(n), 0);
    const std::size_t es = size_of(out.dtype());
    parallel_chunks(n, [&](std::int64_t chunk, std::int64_t begin, std::int64_t end) {
      std::array<double, kBlock> block;
      double worst = 0.0;
      bool any = false;
      for (std::int64_t start = begin; start < end; start += kBlock) {
        const std::int64_t m = std::min(kBlock, end - start);
        decode_elements(out.dtype(), out.data() + static_cast<std::size_t>(start) * es, m, block.data());
        for (std::int64_t j = 0; j < m; ++j) {
          const double v = block[static_cast<std::size_t>(j)], e = ref.exact[static_cast<std::size_t>(start + j)];
          if (!std::isfinite(e)) continue;
          if (std::isfinite(v)) {
            worst = std::max(worst, std::fabs(v - e));
          } else {
            any = true;
            all_cls[static_cast<std::size_t>(start + j)] = std::isnan(v) ? 1 : std::signbit(v) ? 3 : 2;
          }
        }
      }
      chunk_worst[static_cast<std::size_t>(chunk)] = worst;
      chunk_nonfinite[static_cast<std::size_t>(chunk)] = any;
    });
    double worst = 0.0;
    for (const double w : chunk_worst) worst = std::max(worst, w);
    std::vector<std::uint8_t> cls;
    if (std::find(chunk_nonfinite.begin(), chunk_nonfinite.end(), 1) != chunk_nonfinite.end()) cls = std::move(all_cls);
    r.error.push_back(worst);
    bytes += out.nbytes() + cls.size();
    r.nonfinite.push_back(std::move(cls));
  }
  r.outputs = std::move(run.outputs);
  return r;
}

}  // namespace

ReferenceResultPtr GateContext::references(const InputSet& in, const OracleResult& oracle) {
  static const ReferenceResultPtr none = std::make_shared<ReferenceResult>();
  if (!oracle_.has_reference_runs()) return none;
  const std::string key = content_key(in, attrs_);
  if (const ReferenceResultPtr* hit = reference_cache_.find(key)) return *hit;
  ++counters_.reference_evaluations;
  Timed timed(counters_.oracle_seconds);
  auto res = std::make_shared<ReferenceResult>();
  std::size_t bytes = 0;
  for (ReferenceRun& run : oracle_.reference_runs(in.arrays, in.bindings, attrs_))
    res->runs.push_back(judge_reference_run(run, oracle, contract_, bytes));
  ReferenceResultPtr ptr = res;
  reference_cache_.put(key, ptr, bytes, in.pinned);
  return ptr;
}

ReferenceResultPtr GateContext::labelled_references(const InputSet& in, const OracleResult& oracle) {
  const ReferenceResultPtr working = references(in, oracle);
  if (working->runs.empty()) return working;
  const std::string key = content_key(in, attrs_);
  if (const ReferenceResultPtr* hit = label_cache_.find(key)) return *hit;
  ++counters_.label_evaluations;
  Timed timed(counters_.oracle_seconds);
  std::size_t bytes = 0;
  std::vector<ReferenceRun> lower = oracle_.label_runs(in.arrays, in.bindings, attrs_);
  if (lower.empty()) return working;
  auto res = std::make_shared<ReferenceResult>(*working);
  for (ReferenceRun& run : lower) res->runs.push_back(judge_reference_run(run, oracle, contract_, bytes));
  ReferenceResultPtr ptr = res;
  label_cache_.put(key, ptr, bytes);
  return ptr;
}

std::vector<Tolerance> GateContext::tolerances(const Bindings& b) {
  // Below this many elements an output's rms is a poor estimate of the magnitude of its terms.
  constexpr std::int64_t kFewElements = 64;
  std::vector<Tolerance> t;
  const Bindings nominal = contract_.nominal();
  OracleResultPtr at_nominal;
  for (std::size_t i = 0; i < contract_.outputs.size(); ++i) {
    const TensorSpec& o = contract_.outputs[i];
    t.push_back(default_tolerance(o, contract_.working_precision, reduction_size(o, b), tolerance_scale_));
    if (b == nominal || numel(o.resolve(b)) >= kFewElements) continue;
    if (!at_nominal) at_nominal = oracle(*standard_inputs(nominal, 0));  // cached: most gates use it
    t.back().rms_floor = at_nominal->refs[i].rms;
  }
  return t;
}

std::vector<Placement> GateContext::dense_inputs(const Bindings& b, std::int64_t offset) const {
  std::vector<Placement> p;
  for (const TensorSpec& s : contract_.inputs) {
    Placement x{Layout::dense(s.dtype, s.resolve(b)), std::byte{0}};
    x.layout.offset = offset;
    p.push_back(std::move(x));
  }
  return p;
}

std::vector<Placement> GateContext::dense_outputs(const Bindings& b, std::int64_t offset) const {
  std::vector<Placement> p;
  for (const TensorSpec& s : contract_.outputs) {
    Placement x{Layout::dense(s.dtype, s.resolve(b)), std::byte{0}};
    x.layout.offset = offset;
    p.push_back(std::move(x));
  }
  return p;
}

}  // namespace kgate
