// The Contract's own methods and the public entry points of the contract reader.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <cctype>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "frontend/contract_source.hpp"
#include "frontend/shape_expr.hpp"
#include "kgate/contract.hpp"

namespace kgate {
namespace {

std::string located(const std::string& file, int line, int column, const std::string& field,
                    const std::string& what) {
  std::string out = file;
  if (line > 0) out += fmt::format(":{}:{}", line, column);
  out += ": ";
  if (!field.empty()) out += fmt::format("field '{}': ", field);
  return out + what;
}

}  // namespace

ContractError::ContractError(std::string file, int line, int column, std::string field, const std::string& what)
    : std::runtime_error(located(file, line, column, field, what)),
      file_(std::move(file)),
      line_(line),
      column_(column),
      field_(std::move(field)) {}

std::pair<int, int> SourceMap::find(const std::string& field) const {
  std::string f = field;
  while (true) {
    if (auto it = at_.find(f); it != at_.end()) return it->second;
    const std::size_t cut = f.find_last_of(".[");
    if (cut == std::string::npos || cut == 0) return {0, 0};
    f.resize(cut);
  }
}

Shape TensorSpec::resolve(const Bindings& b) const {
  Shape out;
  out.reserve(shape.size());
  for (const std::string& text : shape) {
    std::string why;
    const std::optional<ShapeEntry> e = parse_shape_entry(text, &why);
    if (!e) throw std::invalid_argument(fmt::format("tensor {}: shape entry \"{}\": {}", name, text, why));
    std::int64_t dim_value = 0;
    if (!e->dim.empty()) {
      auto it = b.find(e->dim);
      if (it == b.end())
        throw std::invalid_argument(
            fmt::format("tensor {}: dim {} is not bound (shape [{}])", name, e->dim, fmt::join(shape, ", ")));
      dim_value = it->second;
    }
    const std::optional<std::int64_t> checked = e->value(dim_value);
    if (!checked)
      throw std::invalid_argument(fmt::format("tensor {}: shape entry \"{}\" overflows 64 bits at {}", name, text, to_string(b)));
    const std::int64_t v = *checked;
    if (v < 0)
      throw std::invalid_argument(fmt::format("tensor {}: shape entry \"{}\" is {} at {}", name, text, v, to_string(b)));
    out.push_back(v);
  }
  return out;
}

const DimSpec* Contract::dim(const std::string& n) const {
  for (const DimSpec& d : dims)
    if (d.name == n) return &d;
  return nullptr;
}

Bindings Contract::nominal() const {
  Bindings b;
  for (const DimSpec& d : dims) b[d.name] = d.nominal;
  return b;
}

double Contract::attr(const std::string& n, double fallback) const {
  for (const auto& [k, v] : attrs)
    if (k == n) return v;
  return fallback;
}

bool Contract::admissible(const Bindings& b, std::string* why) const {
  auto no = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  for (const auto& [n, v] : b)
    if (!dim(n)) return no(fmt::format("{} is not a dim of contract {}", n, name));
  for (const DimSpec& d : dims) {
    auto it = b.find(d.name);
    if (it == b.end()) return no(fmt::format("dim {} is not bound", d.name));
    const std::int64_t v = it->second;
    if (v < d.min || v > d.max) return no(fmt::format("{}={} is outside [{}, {}]", d.name, v, d.min, d.max));
    if (d.multiple_of > 1 && v % d.multiple_of != 0)
      return no(fmt::format("{}={} is not a multiple of {}", d.name, v, d.multiple_of));
    if (!d.multiple_of_dim.empty()) {
      auto other = b.find(d.multiple_of_dim);
      if (other == b.end()) return no(fmt::format("dim {} is not bound", d.multiple_of_dim));
      const std::int64_t m = other->second;
      if (m == 0 ? v != 0 : v % m != 0)
        return no(fmt::format("{}={} is not a multiple of {}={}", d.name, v, d.multiple_of_dim, m));
    }
  }
  return true;
}

namespace {

constexpr std::int64_t kNoBytes = std::numeric_limits<std::int64_t>::max();

std::int64_t saturating_mul(std::int64_t a, std::int64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > kNoBytes / b ? kNoBytes : a * b;
}

// The first number in a file whose first line starting with `key` holds it (/proc/meminfo's "MemTotal:  123 kB"),
// or a whole file holding one number (a cgroup's memory.max; "max" is no limit).
std::optional<std::int64_t> read_number(const char* path, const char* key) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string line;
  while (std::getline(in, line)) {
    if (key && line.rfind(key, 0) != 0) continue;
    const std::size_t at = line.find_first_of("0123456789");
    if (at == std::string::npos) return std::nullopt;
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(line.c_str() + at, &end, 10);
    if (errno != 0 || v <= 0) return std::nullopt;
    return static_cast<std::int64_t>(v);
  }
  return std::nullopt;
}

std::string gib(std::int64_t bytes) { return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1 << 30)); }

}  // namespace

std::int64_t case_bytes_per_element(DType t) { return 2 * (static_cast<std::int64_t>(size_of(t)) + 8); }

std::int64_t case_bytes(const Contract& c, const Bindings& b) {
  std::int64_t bytes = 0;
  for (const auto* list : {&c.inputs, &c.outputs}) {
    for (const TensorSpec& s : *list) {
      std::int64_t n = 1;
      for (std::int64_t e : s.resolve(b)) n = saturating_mul(n, e);
      n = std::min(n, c.max_case_elements);
      const std::int64_t more = saturating_mul(n, case_bytes_per_element(s.dtype));
      bytes = more > kNoBytes - bytes ? kNoBytes : bytes + more;
    }
  }
  return bytes;
}

std::int64_t largest_case_bytes(const Contract& c) {
  Bindings at_max;
  for (const DimSpec& d : c.dims) at_max[d.name] = d.max;
  return case_bytes(c, at_max);
}

CaseMemoryLimit case_memory_limit() {
  if (const char* env = std::getenv("KGATE_CASE_MEMORY"); env && *env) {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(env, &end, 10);
    if (errno != 0 || *end != '\0' || v < kMinCaseMemoryBytes || !std::isdigit(static_cast<unsigned char>(*env)))
      throw std::invalid_argument(fmt::format("KGATE_CASE_MEMORY must be a decimal number of bytes >= {}, got \"{}\"",
                                              kMinCaseMemoryBytes, env));
    return {static_cast<std::int64_t>(v), fmt::format("KGATE_CASE_MEMORY = {} bytes", v)};
  }
  std::int64_t total = 0;
  std::string from;
  if (auto kb = read_number("/proc/meminfo", "MemTotal:")) {
    total = saturating_mul(*kb, 1024);
    from = "MemTotal";
  } else {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    total = pages > 0 && page > 0 ? saturating_mul(pages, page) : 0;
    from = "physical pages";
  }
  for (const char* cg : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    if (auto v = read_number(cg, nullptr); v && (*v < total || total == 0)) {
      total = *v;
      from = std::string("the memory cgroup's limit, ") + cg;
    }
  }
  if (total <= 0) return {std::int64_t(8) << 30, "8 GiB (this machine's memory could not be read)"};
  return {total / 4 * 3, fmt::format("3/4 of this machine's {} ({})", gib(total), from)};
}

Contract parse_contract(const std::string& text, const std::string& path, const CaseMemoryLimit& limit) {
  SourceMap where;
  Contract c = read_contract_toml(text, path, where);
  check_contract(c, where, limit);
  return c;
}

Contract parse_contract(const std::string& text, const std::string& path) {
  CaseMemoryLimit limit;
  try {
    limit = case_memory_limit();
  } catch (const std::invalid_argument& e) {
    throw ContractError(path, 0, 0, "", e.what());
  }
  return parse_contract(text, path, limit);
}

Contract load_contract(const std::string& path) {
  // Only a regular file of bounded size: /dev/zero, a FIFO or a directory would read forever or fail late.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw ContractError(path, 0, 0, "", fmt::format("cannot open the contract file: {}", std::strerror(errno)));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    throw ContractError(path, 0, 0, "", "not a regular file (a contract is a TOML file)");
  }
  std::string text;
  char buf[65536];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      throw ContractError(path, 0, 0, "", fmt::format("cannot read the contract file: {}", std::strerror(err)));
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > kMaxContractBytes) {
      close(fd);
      throw ContractError(path, 0, 0, "", fmt::format("larger than {} bytes; a contract is a short TOML file", kMaxContractBytes));
    }
  }
  close(fd);
  return parse_contract(text, path);
}

}  // namespace kgate
