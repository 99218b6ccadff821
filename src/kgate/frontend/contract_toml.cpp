// The TOML walk of a contract file: every key is known, every value has the right type, and every field
// read is recorded with its line and column so later checks can point at it. Cross-field checks live in
// contract_check.cpp; this file only knows the shape of the document.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "frontend/contract_source.hpp"
#include "frontend/shape_expr.hpp"

namespace kgate {
namespace {

std::string join_path(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
}

std::string describe(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return fmt::format("string \"{}\"", n.value<std::string>().value_or(""));
    case toml::node_type::integer: return fmt::format("integer {}", n.value<std::int64_t>().value_or(0));
    case toml::node_type::floating_point: return fmt::format("float {}", n.value<double>().value_or(0.0));
    case toml::node_type::boolean: return n.value<bool>().value_or(false) ? "boolean true" : "boolean false";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "a date or time";
  }
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// A table's entries in file order (toml++ keeps them sorted by key, but dims and attrs keep file order).
std::vector<std::pair<const toml::key*, const toml::node*>> in_file_order(const toml::table& t) {
  std::vector<std::pair<const toml::key*, const toml::node*>> out;
  for (auto&& [k, v] : t) out.emplace_back(&k, &v);
  std::sort(out.begin(), out.end(), [](const auto& x, const auto& y) {
    const auto &a = x.first->source().begin, &b = y.first->source().begin;
    return a.line != b.line ? a.line < b.line : a.column < b.column;
  });
  return out;
}

class Walker {
 public:
  Walker(const std::string& file, SourceMap& where) : file_(file), where_(where) {}

  [[noreturn]] void fail(const toml::source_region& at, const std::string& field, const std::string& what) const {
    throw ContractError(file_, static_cast<int>(at.begin.line), static_cast<int>(at.begin.column), field, what);
  }
  [[noreturn]] void fail(const toml::node& at, const std::string& field, const std::string& what) const {
    fail(at.source(), field, what);
  }

  void note(const std::string& field, const toml::node& n) {
    where_.record(field, static_cast<int>(n.source().begin.line), static_cast<int>(n.source().begin.column));
  }

  // A typo in a key must never be silently ignored, so every table lists the keys it knows.
  void only_keys(const toml::table& t, const std::string& path, std::initializer_list<std::string_view> known) {
    for (const auto& [key, node] : in_file_order(t)) {
      const std::string_view k = key->str();
      if (std::find(known.begin(), known.end(), k) != known.end()) continue;
      std::string what = "unknown key";
      std::string_view best;
      std::size_t best_distance = 3;
      for (std::string_view c : known) {
        if (const std::size_t d = edit_distance(k, c); d < best_distance) best_distance = d, best = c;
      }
      if (!best.empty()) what += fmt::format(" (did you mean '{}'?)", best);
      if (known.size() > 0) what += fmt::format("; {} takes {}", path.empty() ? "the file" : path, fmt::join(known, ", "));
      fail(key->source(), join_path(path, k), what);
    }
  }

  const toml::table& table(const toml::node& n, const std::string& field) {
    note(field, n);
    if (!n.is_table()) fail(n, field, "expected a table, got " + describe(n));
    return *n.as_table();
  }
  const toml::array& array(const toml::node& n, const std::string& field) {
    note(field, n);
    if (!n.is_array()) fail(n, field, "expected an array, got " + describe(n));
    return *n.as_array();
  }
  std::int64_t integer(const toml::node& n, const std::string& field) {
    note(field, n);
    if (!n.is_integer()) fail(n, field, "expected an integer, got " + describe(n));
    return n.as_integer()->get();
  }
  double number(const toml::node& n, const std::string& field) {
    note(field, n);
    if (n.is_integer()) return static_cast<double>(n.as_integer()->get());
    if (!n.is_floating_point()) fail(n, field, "expected a number, got " + describe(n));
    const double v = n.as_floating_point()->get();
    if (!std::isfinite(v)) fail(n, field, fmt::format("expected a finite number, got {}", v));
    return v;
  }
  std::string string(const toml::node& n, const std::string& field) {
    note(field, n);
    if (!n.is_string()) fail(n, field, "expected a string, got " + describe(n));
    return n.as_string()->get();
  }
  bool boolean(const toml::node& n, const std::string& field) {
    note(field, n);
    if (!n.is_boolean()) fail(n, field, "expected true or false, got " + describe(n));
    return n.as_boolean()->get();
  }
  std::string name(const toml::node& n, const std::string& field) {
    std::string s = string(n, field);
    if (!is_identifier(s))
      fail(n, field, fmt::format("\"{}\" is not a valid name (letters, digits and _, not starting with a digit)", s));
    return s;
  }
  DType dtype(const toml::node& n, const std::string& field) {
    const std::string s = string(n, field);
    if (auto t = parse_dtype(s)) return *t;
    std::vector<std::string_view> names;
    for (DType t : kAllDTypes) names.push_back(name_of(t));
    fail(n, field, fmt::format("unknown dtype \"{}\" (expected one of {})", s, fmt::join(names, ", ")));
  }
  template <typename Enum>
  Enum choice(const toml::node& n, const std::string& field, std::initializer_list<std::pair<std::string_view, Enum>> options,
              std::string_view what) {
    const std::string s = string(n, field);
    std::vector<std::string_view> names;
    for (const auto& [k, v] : options) {
      if (k == s) return v;
      names.push_back(k);
    }
    fail(n, field, fmt::format("unknown {} \"{}\" (expected one of {})", what, s, fmt::join(names, ", ")));
  }

  [[noreturn]] void missing(const toml::node& table, const std::string& path, std::string_view key) const {
    fail(table, join_path(path, key), fmt::format("missing (required in {})", path.empty() ? "the file" : path));
  }

 private:
  const std::string& file_;
  SourceMap& where_;
};

class ContractReader {
 public:
  ContractReader(const std::string& file, SourceMap& where) : w_(file, where) {}

  Contract read(const toml::table& root) {
    w_.only_keys(root, "", {"op", "dims", "inputs", "outputs", "attrs", "nonfinite", "accumulation", "limits"});
    Contract c;
    if (const toml::node* op = root.get("op")) read_op(w_.table(*op, "op"), c);
    else w_.missing(root, "", "op");
    if (const toml::node* dims = root.get("dims")) read_dims(w_.table(*dims, "dims"), c);
    if (const toml::node* attrs = root.get("attrs")) read_attrs(w_.table(*attrs, "attrs"), c);
    if (const toml::node* in = root.get("inputs")) read_tensors(*in, "inputs", true, c.inputs);
    if (const toml::node* out = root.get("outputs")) read_tensors(*out, "outputs", false, c.outputs);
    else w_.missing(root, "", "outputs");
    if (const toml::node* nf = root.get("nonfinite")) read_spread(w_.table(*nf, "nonfinite"), c);
    if (const toml::node* acc = root.get("accumulation")) read_accumulation(w_.table(*acc, "accumulation"), c);
    if (const toml::node* lim = root.get("limits")) read_limits(w_.table(*lim, "limits"), c);
    return c;
  }

 private:
  void read_op(const toml::table& t, Contract& c) {
    w_.only_keys(t, "op", {"name", "description", "working_precision", "deterministic"});
    if (const toml::node* n = t.get("name")) c.name = w_.string(*n, "op.name");
    else w_.missing(t, "op", "name");
    if (c.name.empty()) w_.fail(*t.get("name"), "op.name", "must not be empty");
    if (const toml::node* n = t.get("description")) c.description = w_.string(*n, "op.description");
    if (const toml::node* n = t.get("working_precision")) {
      c.working_precision = w_.dtype(*n, "op.working_precision");
      if (!is_float(c.working_precision))
        w_.fail(*n, "op.working_precision", fmt::format("must be a float dtype, got {}", name_of(c.working_precision)));
    }
    if (const toml::node* n = t.get("deterministic")) c.deterministic = w_.boolean(*n, "op.deterministic");
  }

  void read_dims(const toml::table& t, Contract& c) {
    for (const auto& [key, node] : in_file_order(t)) {
      const std::string path = join_path("dims", key->str());
      if (!is_identifier(key->str()))
        w_.fail(key->source(), path, fmt::format("\"{}\" is not a valid dim name", key->str()));
      DimSpec d;
      d.name = std::string(key->str());
      if (node->is_integer()) {  // dims.K = 64: a fixed size
        d.min = d.max = d.nominal = w_.integer(*node, path);
        c.dims.push_back(d);
        continue;
      }
      const toml::table& dt = w_.table(*node, path);
      w_.only_keys(dt, path, {"min", "max", "nominal", "multiple_of", "large"});
      if (const toml::node* n = dt.get("nominal")) d.nominal = w_.integer(*n, path + ".nominal");
      else w_.missing(dt, path, "nominal");
      d.min = d.max = d.nominal;
      if (const toml::node* n = dt.get("min")) d.min = w_.integer(*n, path + ".min");
      if (const toml::node* n = dt.get("max")) d.max = w_.integer(*n, path + ".max");
      if (const toml::node* n = dt.get("multiple_of")) {
        if (n->is_string()) d.multiple_of_dim = w_.name(*n, path + ".multiple_of");
        else if (n->is_integer()) d.multiple_of = w_.integer(*n, path + ".multiple_of");
        else w_.fail(*n, path + ".multiple_of", "expected an integer or a dim name, got " + describe(*n));
      }
      if (const toml::node* n = dt.get("large")) d.large = w_.integer(*n, path + ".large");
      c.dims.push_back(d);
    }
  }

  void read_attrs(const toml::table& t, Contract& c) {
    for (const auto& [key, node] : in_file_order(t)) {
      const std::string path = join_path("attrs", key->str());
      if (!is_identifier(key->str()))
        w_.fail(key->source(), path, fmt::format("\"{}\" is not a valid attr name", key->str()));
      c.attrs.emplace_back(std::string(key->str()), w_.number(*node, path));
    }
  }

  void read_tensors(const toml::node& node, const std::string& path, bool inputs, std::vector<TensorSpec>& out) {
    const toml::array& a = w_.array(node, path);
    for (std::size_t i = 0; i < a.size(); ++i) {
      const std::string at = fmt::format("{}[{}]", path, i);
      out.push_back(read_tensor(w_.table(a[i], at), at, inputs));
    }
  }

  TensorSpec read_tensor(const toml::table& t, const std::string& path, bool input) {
    if (input) w_.only_keys(t, path, {"name", "dtype", "shape", "domain", "layout", "nonfinite", "overflow"});
    else w_.only_keys(t, path, {"name", "dtype", "shape", "layout", "reduced", "tolerance", "operands"});
    TensorSpec s;
    if (const toml::node* n = t.get("name")) s.name = w_.name(*n, path + ".name");
    else w_.missing(t, path, "name");
    if (const toml::node* n = t.get("dtype")) s.dtype = w_.dtype(*n, path + ".dtype");
    else w_.missing(t, path, "dtype");
    if (const toml::node* n = t.get("shape")) read_shape(w_.array(*n, path + ".shape"), path + ".shape", s);
    else w_.missing(t, path, "shape");
    if (const toml::node* n = t.get("layout"))
      s.strided = w_.choice<bool>(*n, path + ".layout", {{"contiguous", false}, {"strided", true}}, "layout");
    if (const toml::node* n = t.get("nonfinite")) s.nonfinite = w_.boolean(*n, path + ".nonfinite");
    if (const toml::node* n = t.get("overflow")) s.overflow = w_.boolean(*n, path + ".overflow");
    if (input) read_domain(t, path, s);
    if (const toml::node* n = t.get("reduced")) {
      const toml::array& a = w_.array(*n, path + ".reduced");
      for (std::size_t i = 0; i < a.size(); ++i) s.reduced.push_back(w_.name(a[i], fmt::format("{}.reduced[{}]", path, i)));
    }
    if (const toml::node* n = t.get("tolerance")) read_tolerance(w_.table(*n, path + ".tolerance"), path + ".tolerance", s);
    if (const toml::node* n = t.get("operands")) read_operands(w_.table(*n, path + ".operands"), path + ".operands", s);
    return s;
  }

  void read_shape(const toml::array& a, const std::string& path, TensorSpec& s) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      const std::string at = fmt::format("{}[{}]", path, i);
      if (a[i].is_integer()) {
        const std::int64_t v = w_.integer(a[i], at);
        if (v < 0) w_.fail(a[i], at, fmt::format("a size cannot be negative, got {}", v));
        s.shape.push_back(std::to_string(v));
        continue;
      }
      if (!a[i].is_string()) w_.fail(a[i], at, "expected a dim name or an integer, got " + describe(a[i]));
      const std::string text = w_.string(a[i], at);
      std::string why;
      if (!parse_shape_entry(text, &why)) w_.fail(a[i], at, fmt::format("\"{}\": {}", text, why));
      s.shape.push_back(text);
    }
  }

  void read_domain(const toml::table& t, const std::string& path, TensorSpec& s) {
    const std::string dpath = path + ".domain";
    const toml::node* n = t.get("domain");
    if (!n) {
      // Floats default to the standard normal; an integer input has no natural default range.
      if (s.dtype == DType::boolean) s.domain.kind = DomainKind::integer, s.domain.a = 0, s.domain.b = 1;
      else if (!is_float(s.dtype))
        w_.fail(t, dpath, fmt::format("missing: an {} input needs domain = {{ kind = \"integer\", low = ..., high = ... }} "
                                      "or {{ kind = \"offsets\", total = \"DIM\" }}", name_of(s.dtype)));
      return;
    }
    auto kind_of = [&](const toml::node& k, const std::string& field) {
      return w_.choice<DomainKind>(k, field,
                                   {{"normal", DomainKind::normal},
                                    {"uniform", DomainKind::uniform},
                                    {"positive", DomainKind::positive},
                                    {"probability", DomainKind::probability},
                                    {"integer", DomainKind::integer},
                                    {"offsets", DomainKind::offsets}},
                                   "domain kind");
    };
    Domain& d = s.domain;
    const toml::table* dt = nullptr;
    if (n->is_table()) {
      dt = &w_.table(*n, dpath);
      if (const toml::node* k = dt->get("kind")) d.kind = kind_of(*k, dpath + ".kind");
      else w_.missing(*dt, dpath, "kind");
    } else if (n->is_string()) {
      d.kind = kind_of(*n, dpath);
    } else {
      w_.fail(*n, dpath, "expected a domain kind or a table { kind = ..., ... }, got " + describe(*n));
    }
    auto num = [&](std::string_view key, double fallback) {
      const toml::node* v = dt ? dt->get(key) : nullptr;
      return v ? w_.number(*v, join_path(dpath, key)) : fallback;
    };
    auto required_int = [&](std::string_view key) -> double {
      const toml::node* v = dt ? dt->get(key) : nullptr;
      if (!v)
        w_.fail(dt ? static_cast<const toml::node&>(*dt) : *n, join_path(dpath, key),
                "missing (an integer domain needs low and high)");
      return static_cast<double>(w_.integer(*v, join_path(dpath, key)));
    };
    switch (d.kind) {
      case DomainKind::normal:
        if (dt) w_.only_keys(*dt, dpath, {"kind", "mean", "std"});
        d.a = num("mean", 0.0), d.b = num("std", 1.0);
        break;
      case DomainKind::uniform:
        if (dt) w_.only_keys(*dt, dpath, {"kind", "low", "high"});
        d.a = num("low", -1.0), d.b = num("high", 1.0);
        break;
      case DomainKind::positive:
        if (dt) w_.only_keys(*dt, dpath, {"kind", "low", "high"});
        d.a = num("low", 0.5), d.b = num("high", 2.0);
        break;
      case DomainKind::probability:
        if (dt) w_.only_keys(*dt, dpath, {"kind"});
        d.a = 0.0, d.b = 1.0;
        break;
      case DomainKind::integer:
        if (dt) w_.only_keys(*dt, dpath, {"kind", "low", "high"});
        d.a = required_int("low"), d.b = required_int("high");
        break;
      case DomainKind::offsets:
        if (dt) w_.only_keys(*dt, dpath, {"kind", "total", "allow_empty"});
        if (const toml::node* v = dt ? dt->get("total") : nullptr) d.total = w_.name(*v, dpath + ".total");
        else w_.fail(dt ? static_cast<const toml::node&>(*dt) : *n, dpath + ".total",
                     "missing (offsets need total = \"DIM\", the dim the last offset equals)");
        if (const toml::node* v = dt->get("allow_empty")) d.allow_empty = w_.boolean(*v, dpath + ".allow_empty");
        d.a = 0.0, d.b = 0.0;
        break;
    }
  }

  void read_tolerance(const toml::table& t, const std::string& path, TensorSpec& s) {
    w_.only_keys(t, path, {"rtol", "atol", "atol_rms", "scale"});
    auto nonnegative = [&](std::string_view key) -> std::optional<double> {
      const toml::node* n = t.get(key);
      if (!n) return std::nullopt;
      const double v = w_.number(*n, join_path(path, key));
      if (v < 0) w_.fail(*n, join_path(path, key), fmt::format("must be >= 0, got {}", v));
      return v;
    };
    s.rtol = nonnegative("rtol");
    s.atol = nonnegative("atol");
    s.atol_rms = nonnegative("atol_rms");
    if (const toml::node* n = t.get("scale")) {
      s.tolerance_scale = w_.number(*n, path + ".scale");
      if (s.tolerance_scale <= 0) w_.fail(*n, path + ".scale", fmt::format("must be > 0, got {}", s.tolerance_scale));
    }
  }

  void read_operands(const toml::table& t, const std::string& path, TensorSpec& s) {
    w_.only_keys(t, path, {"precision", "roundings"});
    TensorSpec::OperandRounding r;
    if (const toml::node* n = t.get("precision")) {
      r.precision = w_.dtype(*n, path + ".precision");
      if (!is_float(r.precision))
        w_.fail(*n, path + ".precision", fmt::format("must be a float dtype, got {}", name_of(r.precision)));
    } else {
      w_.missing(t, path, "precision");
    }
    if (const toml::node* n = t.get("roundings")) {
      const std::int64_t v = w_.integer(*n, path + ".roundings");
      // r u_op < 1 is where gamma_r exists; 1000 is far past any real path and keeps the int honest.
      if (v < 1 || v > 1000) w_.fail(*n, path + ".roundings", fmt::format("must be 1 to 1000, got {}", v));
      r.roundings = static_cast<int>(v);
    } else {
      w_.missing(t, path, "roundings");
    }
    s.operands = r;
  }

  void read_spread(const toml::table& t, Contract& c) {
    w_.only_keys(t, "nonfinite", {"spread", "dim", "block", "segments", "direction", "inf_may_become_nan"});
    SpreadRule& r = c.spread;
    bool along = t.get("dim") != nullptr;
    if (const toml::node* n = t.get("spread")) {
      along = w_.choice<bool>(*n, "nonfinite.spread", {{"oracle", false}, {"along", true}}, "spread");
      if (!along) {
        for (std::string_view k : {"dim", "block", "segments", "direction"})
          if (const toml::node* extra = t.get(k))
            w_.fail(*extra, join_path("nonfinite", k),
                    "spread = \"oracle\" allows no extra spread; use spread = \"along\" with dim = \"...\"");
      }
    }
    r.exact = !along;
    if (const toml::node* n = t.get("dim")) r.dim = w_.name(*n, "nonfinite.dim");
    else if (along) w_.missing(t, "nonfinite", "dim");
    if (const toml::node* n = t.get("block")) {
      if (n->is_string()) {
        // block = "chunk": the block size is an attr, so contract and kernel cannot disagree on it.
        r.block_attr = w_.name(*n, "nonfinite.block");
        auto it = std::find_if(c.attrs.begin(), c.attrs.end(), [&](const auto& a) { return a.first == r.block_attr; });
        if (it == c.attrs.end())
          w_.fail(*n, "nonfinite.block", fmt::format("\"{}\" is not an attr (declared attrs: {})", r.block_attr,
                                                     attr_names(c)));
        if (it->second < 1 || it->second != std::floor(it->second))
          w_.fail(*n, "nonfinite.block", fmt::format("attr {} = {} is not a positive integer", it->first, it->second));
        r.block = static_cast<std::int64_t>(it->second);
      } else {
        r.block = w_.integer(*n, "nonfinite.block");
        if (r.block < 1) w_.fail(*n, "nonfinite.block", fmt::format("must be >= 1, got {}", r.block));
      }
    }
    if (const toml::node* n = t.get("segments")) r.segments = w_.name(*n, "nonfinite.segments");
    if (const toml::node* n = t.get("direction"))
      r.direction = w_.choice<SpreadRule::Direction>(*n, "nonfinite.direction",
                              {{"forward", SpreadRule::Direction::forward},
                               {"backward", SpreadRule::Direction::backward},
                               {"both", SpreadRule::Direction::both}},
                              "direction");
    if (const toml::node* n = t.get("inf_may_become_nan"))
      r.inf_may_become_nan = w_.boolean(*n, "nonfinite.inf_may_become_nan");
  }

  void read_accumulation(const toml::table& t, Contract& c) {
    w_.only_keys(t, "accumulation", {"inputs", "sizes"});
    if (const toml::node* n = t.get("inputs")) {
      const toml::array& a = w_.array(*n, "accumulation.inputs");
      for (std::size_t i = 0; i < a.size(); ++i) {
        const std::string at = fmt::format("accumulation.inputs[{}]", i);
        const toml::table& it = w_.table(a[i], at);
        w_.only_keys(it, at, {"input", "pattern", "value"});
        AccumulationInput in;
        if (const toml::node* v = it.get("input")) in.input = w_.name(*v, at + ".input");
        else w_.missing(it, at, "input");
        if (const toml::node* v = it.get("pattern"))
          in.pattern = w_.choice<AccumulationInput::Pattern>(*v, at + ".pattern",
                                 {{"constant", AccumulationInput::Pattern::constant},
                                  {"positive", AccumulationInput::Pattern::positive}},
                                 "pattern");
        if (const toml::node* v = it.get("value")) {
          in.value = w_.number(*v, at + ".value");
          if (in.value == 0) w_.fail(*v, at + ".value", "must not be 0 (a zero input accumulates nothing)");
          if (in.pattern == AccumulationInput::Pattern::positive && in.value < 0)
            w_.fail(*v, at + ".value", fmt::format("pattern \"positive\" needs value > 0, got {}", in.value));
        }
        c.accumulation.inputs.push_back(in);
      }
    }
    if (const toml::node* n = t.get("sizes")) {
      for (const auto& [key, node] : in_file_order(w_.table(*n, "accumulation.sizes")))
        c.accumulation.sizes[std::string(key->str())] = w_.integer(*node, join_path("accumulation.sizes", key->str()));
    }
  }

  void read_limits(const toml::table& t, Contract& c) {
    w_.only_keys(t, "limits", {"max_case_elements", "timeout"});
    if (const toml::node* n = t.get("max_case_elements")) {
      c.max_case_elements = w_.integer(*n, "limits.max_case_elements");
      if (c.max_case_elements < 1)
        w_.fail(*n, "limits.max_case_elements", fmt::format("must be >= 1, got {}", c.max_case_elements));
    }
    if (const toml::node* n = t.get("timeout")) {
      c.timeout_seconds = w_.number(*n, "limits.timeout");
      if (!(c.timeout_seconds >= kMinTimeoutSeconds && c.timeout_seconds <= kMaxTimeoutSeconds))
        w_.fail(*n, "limits.timeout", fmt::format("must be from {} to {} seconds, got {}", kMinTimeoutSeconds,
                                                  kMaxTimeoutSeconds, c.timeout_seconds));
    }
  }

  static std::string attr_names(const Contract& c) {
    if (c.attrs.empty()) return "none";
    std::vector<std::string> names;
    for (const auto& a : c.attrs) names.push_back(a.first);
    return fmt::format("{}", fmt::join(names, ", "));
  }

  Walker w_;
};

}  // namespace

Contract read_contract_toml(const std::string& text, const std::string& path, SourceMap& where) {
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    throw ContractError(path, static_cast<int>(e.source().begin.line), static_cast<int>(e.source().begin.column), "",
                        fmt::format("TOML syntax error: {}", e.description()));
  }
  Contract c = ContractReader(path, where).read(root);
  c.path = path;
  return c;
}

}  // namespace kgate
