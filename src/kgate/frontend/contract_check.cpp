// Checks that need more than one field: a contract that reads well but contradicts itself (a nominal
// outside its range, a shape naming an undeclared dim, a spread rule naming an unknown input) is rejected
// here, at the field that is wrong, before any gate draws an input from it.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "frontend/contract_source.hpp"
#include "frontend/shape_expr.hpp"

namespace kgate {
namespace {

class Checker {
 public:
  Checker(const Contract& c, const SourceMap& where, const CaseMemoryLimit& limit)
      : c_(c), where_(where), limit_(limit) {}

  void run() {
    check_dims();
    check_tensors();
    check_spread();
    check_accumulation();
    check_nominal_fits();
    check_case_memory();
  }

 private:
  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    const auto [line, column] = where_.find(field);
    throw ContractError(c_.path, line, column, field, what);
  }

  std::string declared_dims() const {
    if (c_.dims.empty()) return "none declared";
    std::vector<std::string> names;
    for (const DimSpec& d : c_.dims) names.push_back(d.name);
    return fmt::format("declared: {}", fmt::join(names, ", "));
  }

  // Whether value v of dim d respects its own multiple_of (the dim-valued form is judged per binding).
  static bool on_grid(const DimSpec& d, std::int64_t v) { return d.multiple_of <= 1 || v % d.multiple_of == 0; }

  void check_dims() {
    for (const DimSpec& d : c_.dims) {
      const std::string p = "dims." + d.name;
      if (d.min < 0) fail(p + ".min", fmt::format("must be >= 0, got {}", d.min));
      if (d.min > d.max) fail(p + ".min", fmt::format("min {} is greater than max {}", d.min, d.max));
      if (d.nominal < d.min || d.nominal > d.max)
        fail(p + ".nominal", fmt::format("nominal {} is outside [min, max] = [{}, {}]", d.nominal, d.min, d.max));
      if (d.multiple_of < 1) fail(p + ".multiple_of", fmt::format("must be >= 1, got {}", d.multiple_of));
      for (const auto& [key, v] : {std::pair{"min", d.min}, {"max", d.max}, {"nominal", d.nominal}}) {
        if (!on_grid(d, v))
          fail(fmt::format("{}.{}", p, key), fmt::format("{} {} is not a multiple of {} (multiple_of)", key, v, d.multiple_of));
      }
      if (!d.multiple_of_dim.empty()) {
        if (d.multiple_of_dim == d.name) fail(p + ".multiple_of", "a dim cannot be a multiple of itself");
        const DimSpec* other = c_.dim(d.multiple_of_dim);
        if (!other)
          fail(p + ".multiple_of", fmt::format("dim \"{}\" is not declared ({})", d.multiple_of_dim, declared_dims()));
        if (other->nominal == 0 ? d.nominal != 0 : d.nominal % other->nominal != 0)
          fail(p + ".nominal", fmt::format("nominal {} is not a multiple of {}'s nominal {}", d.nominal, other->name,
                                           other->nominal));
      }
      if (d.large != 0) {
        if (d.large < d.min || d.large > d.max)
          fail(p + ".large", fmt::format("large {} is outside [min, max] = [{}, {}]", d.large, d.min, d.max));
        if (!on_grid(d, d.large))
          fail(p + ".large", fmt::format("large {} is not a multiple of {} (multiple_of)", d.large, d.multiple_of));
      }
    }
  }

  void check_tensors() {
    std::set<std::string> names;
    auto unique = [&](const TensorSpec& s, const std::string& p) {
      if (!names.insert(s.name).second)
        fail(p + ".name", fmt::format("duplicate tensor name \"{}\" (inputs and outputs share one namespace)", s.name));
    };
    for (std::size_t i = 0; i < c_.inputs.size(); ++i) {
      const std::string p = fmt::format("inputs[{}]", i);
      unique(c_.inputs[i], p);
      check_shape(c_.inputs[i], p);
      check_domain(c_.inputs[i], p);
    }
    if (c_.outputs.empty()) fail("outputs", "a contract needs at least one output");
    for (std::size_t i = 0; i < c_.outputs.size(); ++i) {
      const std::string p = fmt::format("outputs[{}]", i);
      unique(c_.outputs[i], p);
      check_shape(c_.outputs[i], p);
      check_reduced(c_.outputs[i], p);
    }
  }

  void check_shape(const TensorSpec& s, const std::string& p) {
    for (std::size_t k = 0; k < s.shape.size(); ++k) {
      const std::string at = fmt::format("{}.shape[{}]", p, k);
      const ShapeEntry e = *parse_shape_entry(s.shape[k], nullptr);  // syntax already checked by the reader
      if (e.dim.empty()) continue;
      const DimSpec* d = c_.dim(e.dim);
      if (!d) fail(at, fmt::format("dim \"{}\" is not declared ({})", e.dim, declared_dims()));
      for (const auto& [which, v] : {std::pair{"min", d->min}, {"max", d->max}}) {
        if (!e.value(v))
          fail(at, fmt::format("\"{}\" overflows 64 bits at {}'s {} {}", s.shape[k], d->name, which, v));
      }
      if (*e.value(d->min) < 0)
        fail(at, fmt::format("\"{}\" is negative at {}'s min {}", s.shape[k], d->name, d->min));
    }
    // The element count at every dim's max must be computable, or a gate sizing a case there would wrap.
    std::int64_t n = 1;
    for (std::size_t k = 0; k < s.shape.size(); ++k) {
      const ShapeEntry e = *parse_shape_entry(s.shape[k], nullptr);
      const std::int64_t v = e.dim.empty() ? e.constant : *e.value(c_.dim(e.dim)->max);
      if (__builtin_mul_overflow(n, v, &n))
        fail(p + ".shape", fmt::format("{}'s element count overflows 64 bits at the dims' max ([{}])", s.name,
                                       fmt::join(s.shape, ", ")));
    }
  }

  void check_domain(const TensorSpec& s, const std::string& p) {
    const Domain& d = s.domain;
    const std::string dp = p + ".domain";
    const bool integer_dtype = !is_float(s.dtype) && s.dtype != DType::boolean;
    switch (d.kind) {
      case DomainKind::normal:
        if (!is_float(s.dtype)) fail(dp, fmt::format("a normal domain needs a float dtype, {} is {}", s.name, name_of(s.dtype)));
        if (d.b <= 0) fail(dp + ".std", fmt::format("must be > 0, got {}", d.b));
        break;
      case DomainKind::uniform:
      case DomainKind::positive:
        if (!is_float(s.dtype))
          fail(dp, fmt::format("a {} domain needs a float dtype, {} is {}",
                               d.kind == DomainKind::uniform ? "uniform" : "positive", s.name, name_of(s.dtype)));
        if (d.kind == DomainKind::positive && d.a <= 0) fail(dp + ".low", fmt::format("must be > 0, got {}", d.a));
        if (d.a >= d.b) fail(dp + ".low", fmt::format("low {} is not below high {}", d.a, d.b));
        break;
      case DomainKind::probability:
        if (integer_dtype) fail(dp, fmt::format("a probability domain needs a float or bool dtype, {} is {}", s.name, name_of(s.dtype)));
        break;
      case DomainKind::integer: {
        if (d.a > d.b) fail(dp + ".low", fmt::format("low {} is greater than high {}", d.a, d.b));
        if (!is_float(s.dtype)) {
          const double lo = s.dtype == DType::boolean ? 0.0 : -info(s.dtype).max_finite - 1;
          const double hi = info(s.dtype).max_finite;
          if (d.a < lo) fail(dp + ".low", fmt::format("{} does not fit in {}", d.a, name_of(s.dtype)));
          if (d.b > hi) fail(dp + ".high", fmt::format("{} does not fit in {}", d.b, name_of(s.dtype)));
        }
        break;
      }
      case DomainKind::offsets:
        if (!integer_dtype)
          fail(p + ".dtype", fmt::format("an offsets domain needs an integer dtype (i32 or i64), got {}", name_of(s.dtype)));
        if (!c_.dim(d.total))
          fail(dp + ".total", fmt::format("dim \"{}\" is not declared ({})", d.total, declared_dims()));
        if (s.shape.size() != 1)
          fail(p + ".shape", fmt::format("offsets are one-dimensional (shape = [\"N+1\"]), got {} dims", s.shape.size()));
        break;
    }
  }

  void check_reduced(const TensorSpec& s, const std::string& p) {
    std::set<std::string> input_dims;
    for (const TensorSpec& in : c_.inputs)
      for (const std::string& entry : in.shape) input_dims.insert(parse_shape_entry(entry, nullptr)->dim);
    input_dims.erase("");
    if (s.operands && s.reduced.empty())
      fail(p + ".operands", "says how the terms of a reduction are rounded, but the output has no `reduced` dims "
                            "(only the accumulation gate uses it, on outputs that reduce)");
    for (std::size_t k = 0; k < s.reduced.size(); ++k) {
      const std::string at = fmt::format("{}.reduced[{}]", p, k);
      if (!c_.dim(s.reduced[k])) fail(at, fmt::format("dim \"{}\" is not declared ({})", s.reduced[k], declared_dims()));
      if (!input_dims.count(s.reduced[k]))
        fail(at, fmt::format("dim \"{}\" appears in no input's shape, so nothing can be reduced over it (inputs use {})",
                             s.reduced[k], input_dims.empty() ? "no dims" : fmt::format("{}", fmt::join(input_dims, ", "))));
    }
  }

  const TensorSpec* input(const std::string& name) const {
    for (const TensorSpec& s : c_.inputs)
      if (s.name == name) return &s;
    return nullptr;
  }

  std::string input_names() const {
    std::vector<std::string> names;
    for (const TensorSpec& s : c_.inputs) names.push_back(s.name);
    return names.empty() ? "no inputs" : fmt::format("inputs: {}", fmt::join(names, ", "));
  }

  void check_spread() {
    const SpreadRule& r = c_.spread;
    if (!r.dim.empty() && !c_.dim(r.dim))
      fail("nonfinite.dim", fmt::format("dim \"{}\" is not declared ({})", r.dim, declared_dims()));
    if (!r.segments.empty()) {
      const TensorSpec* seg = input(r.segments);
      if (!seg) fail("nonfinite.segments", fmt::format("\"{}\" is not an input ({})", r.segments, input_names()));
      if (seg->domain.kind != DomainKind::offsets)
        fail("nonfinite.segments", fmt::format("input \"{}\" must have an offsets domain to mark segments", r.segments));
      if (seg->domain.total != r.dim)
        fail("nonfinite.segments", fmt::format("the segments of \"{}\" run along dim {}, but the spread is along {}",
                                               r.segments, seg->domain.total, r.dim));
    }
  }

  void check_accumulation() {
    std::set<std::string> seen;
    for (std::size_t i = 0; i < c_.accumulation.inputs.size(); ++i) {
      const std::string at = fmt::format("accumulation.inputs[{}].input", i);
      const std::string& n = c_.accumulation.inputs[i].input;
      const TensorSpec* s = input(n);
      if (!s) fail(at, fmt::format("\"{}\" is not an input ({})", n, input_names()));
      if (!is_float(s->dtype)) fail(at, fmt::format("input \"{}\" is {}; accumulation patterns are for float inputs", n, name_of(s->dtype)));
      if (!seen.insert(n).second) fail(at, fmt::format("input \"{}\" is listed twice", n));
    }
    for (const auto& [name, v] : c_.accumulation.sizes) {
      const std::string at = "accumulation.sizes." + name;
      const DimSpec* d = c_.dim(name);
      if (!d) fail(at, fmt::format("dim \"{}\" is not declared ({})", name, declared_dims()));
      if (v < d->min || v > d->max) fail(at, fmt::format("{} is outside [min, max] = [{}, {}]", v, d->min, d->max));
      if (!on_grid(*d, v)) fail(at, fmt::format("{} is not a multiple of {} (multiple_of)", v, d->multiple_of));
    }
  }

  // A nominal case larger than the contract's own element budget could never run.
  void check_nominal_fits() {
    std::string why;
    if (!c_.admissible(c_.nominal(), &why)) fail("dims", "the nominal shape is not admissible: " + why);
    const Bindings b = c_.nominal();
    auto fits = [&](const TensorSpec& s, const std::string& p) {
      const std::int64_t n = numel(s.resolve(b));
      if (n > c_.max_case_elements)
        fail(p + ".shape", fmt::format("{} has {} elements at the nominal shape ({}), more than limits.max_case_elements = {}",
                                       s.name, n, to_string(b), c_.max_case_elements));
    };
    for (std::size_t i = 0; i < c_.inputs.size(); ++i) fits(c_.inputs[i], fmt::format("inputs[{}]", i));
    for (std::size_t i = 0; i < c_.outputs.size(); ++i) fits(c_.outputs[i], fmt::format("outputs[{}]", i));
  }

  // The largest case any gate can make (every tensor at the dims' max, each capped at max_case_elements: the
  // gates halve larger ones) must fit the case memory limit (case_bytes' estimate: each tensor and its float64
  // copy twice; measured 27.5 bytes an element peak for two f32 tensors of 15.6M elements, against 24
  // estimated), checked here, before anything is allocated: a contract must not drive the judge out of memory.
  // The limit is the machine's (case_memory_limit), not a constant. A nominal case that alone passes it can
  // never run here, whatever max says: that is its own message, apart from a range that merely reaches too far.
  void check_case_memory() {
    if (limit_.bytes <= 0) return;
    const Bindings nominal = c_.nominal();
    Bindings at_max;
    for (const DimSpec& d : c_.dims) at_max[d.name] = d.max;
    // The tensor holding most of a case at b, for the message: its field, name and (capped) element count.
    auto biggest = [&](const Bindings& b) {
      std::string field, name;
      std::int64_t most = -1, elements = 0;
      for (const auto& [list, kind] : {std::pair{&c_.inputs, "inputs"}, {&c_.outputs, "outputs"}}) {
        for (std::size_t i = 0; i < list->size(); ++i) {
          const TensorSpec& s = (*list)[i];
          Contract one = c_;
          one.inputs.clear();
          one.outputs = {s};
          const std::int64_t bytes = case_bytes(one, b);
          if (bytes > most) {
            most = bytes;
            field = fmt::format("{}[{}]", kind, i);
            name = s.name;
            elements = bytes / case_bytes_per_element(s.dtype);  // capped at max_case_elements by case_bytes
          }
        }
      }
      return std::tuple{field, name, elements};
    };
    const std::int64_t at_nominal = case_bytes(c_, nominal);
    if (at_nominal > limit_.bytes) {
      const auto [field, name, n] = biggest(nominal);
      fail(field + ".shape",
           fmt::format("the nominal case ({}) needs about {} bytes ({}; {} has {} elements), more than one case may "
                       "use here: {} bytes, {}; this machine cannot judge it (a smaller nominal shape, or a machine "
                       "with more memory, can)",
                       to_string(nominal), at_nominal, gib(at_nominal), name, n, limit_.bytes, limit_.why));
    }
    const std::int64_t largest = case_bytes(c_, at_max);
    if (largest > limit_.bytes) {
      const auto [field, name, n] = biggest(at_max);
      fail(n == c_.max_case_elements ? "limits.max_case_elements" : "dims",
           fmt::format("the largest case needs about {} bytes ({}), more than one case may use here: {} bytes, {} "
                       "({} has {} elements at the dims' max, capped by limits.max_case_elements = {}); the nominal "
                       "case needs {}: lower max or max_case_elements",
                       largest, gib(largest), limit_.bytes, limit_.why, name, n, c_.max_case_elements, gib(at_nominal)));
    }
  }

  static std::string gib(std::int64_t bytes) {
    return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (std::int64_t(1) << 30));
  }

  const Contract& c_;
  const SourceMap& where_;
  const CaseMemoryLimit& limit_;
};

}  // namespace

void check_contract(const Contract& contract, const SourceMap& where, const CaseMemoryLimit& limit) {
  Checker(contract, where, limit).run();
}

}  // namespace kgate
