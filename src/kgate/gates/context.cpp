// The context gates share: memoised input sets and oracle outputs, bounds, and tensor placement.
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "kgate/gate.hpp"

namespace kgate {
namespace {

constexpr std::size_t kInputCacheBytes = std::size_t{256} << 20;
constexpr std::size_t kOracleCacheBytes = std::size_t{512} << 20;

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
  for (const HostArray& a : s.arrays) {
    h.add(static_cast<std::uint64_t>(a.dtype()));
    for (std::int64_t d : a.shape()) h.add(static_cast<std::uint64_t>(d));
    h.add_bytes(a.data(), a.nbytes());
  }
  for (const auto& [name, v] : attrs) {
    std::uint64_t w;
    std::memcpy(&w, &v, 8);
    h.add(w);
  }
  return fmt::format("{}|{:016x}{:016x}", to_string(s.bindings), h.a, h.b);
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
void GateContext::Cache<V>::put(const std::string& key, V value, std::size_t size) {
  if (items.count(key)) return;
  items.emplace(key, std::make_pair(std::move(value), size));
  order.push_front(key);
  bytes += size;
  while (bytes > limit && order.size() > 1) {
    const std::string victim = order.back();
    order.pop_back();
    bytes -= items[victim].second;
    items.erase(victim);
  }
}

GateContext::GateContext(const Contract& contract, Target& candidate, Oracle& oracle, std::uint64_t run_seed,
                         double tolerance_scale)
    : contract_(contract),
      candidate_(candidate),
      oracle_(oracle),
      run_seed_(run_seed),
      tolerance_scale_(tolerance_scale),
      attrs_(contract.attrs) {
  input_cache_.limit = kInputCacheBytes;
  oracle_cache_.limit = kOracleCacheBytes;
}

InputSetPtr GateContext::inputs(const Bindings& b, Stream stream, Distribution d, std::string label) {
  const std::string key = fmt::format("{:016x}|{}|{}", stream.key(), to_string(d), to_string(b));
  if (const InputSetPtr* hit = input_cache_.find(key)) return *hit;
  auto set = std::make_shared<InputSet>();
  set->bindings = b;
  set->seed = stream.key();
  set->label = std::move(label);
  set->arrays = generate_inputs(contract_, b, stream, d);
  const std::size_t bytes = bytes_of(set->arrays);
  InputSetPtr ptr = set;
  input_cache_.put(key, ptr, bytes);
  return ptr;
}

InputSetPtr GateContext::standard_inputs(const Bindings& b, int k) {
  return inputs(b, standard_stream(k), Distribution::contract, fmt::format("standard set {}", k));
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
  if (const OracleResultPtr* hit = oracle_cache_.find(key)) return *hit;
  ++oracle_evaluations_;
  auto res = std::make_shared<OracleResult>();
  res->outputs = oracle_.evaluate(in.arrays, in.bindings, attrs_);
  if (res->outputs.size() != contract_.outputs.size())
    throw OracleError(fmt::format("oracle {} returned {} outputs; contract {} has {}", oracle_.describe(),
                                  res->outputs.size(), contract_.name, contract_.outputs.size()));
  for (std::size_t o = 0; o < contract_.outputs.size(); ++o) {
    const TensorSpec& spec = contract_.outputs[o];
    const Shape want = spec.resolve(in.bindings);
    if (res->outputs[o].shape() != want)
      throw OracleError(fmt::format("oracle {} returned output {} with shape {}; the contract says {} at {}",
                                    oracle_.describe(), spec.name, shape_string(res->outputs[o].shape()),
                                    shape_string(want), to_string(in.bindings)));
    res->refs.push_back(make_reference(res->outputs[o], spec.dtype));
  }
  std::size_t bytes = bytes_of(res->outputs);
  for (const Reference& r : res->refs) bytes += 2 * r.exact.size() * sizeof(double);
  OracleResultPtr ptr = res;
  oracle_cache_.put(key, ptr, bytes);
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
