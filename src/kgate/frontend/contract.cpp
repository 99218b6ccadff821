// The Contract's own methods and the public entry points of the contract reader.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
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

Contract parse_contract(const std::string& text, const std::string& path) {
  SourceMap where;
  Contract c = read_contract_toml(text, path, where);
  check_contract(c, where);
  return c;
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
