#include "frontend/shape_expr.hpp"

#include <cctype>
#include <charconv>
#include <limits>

namespace kgate {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::optional<std::int64_t> parse_count(std::string_view s) {
  s = trim(s);
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s.front()))) return std::nullopt;
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

bool is_identifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

std::optional<std::int64_t> ShapeEntry::value(std::int64_t d) const {
  if (dim.empty()) return constant;
  std::int64_t out = d;
  bool overflow = false;
  switch (op) {
    case '+': overflow = __builtin_add_overflow(d, constant, &out); break;
    case '-': overflow = __builtin_sub_overflow(d, constant, &out); break;
    case '*': overflow = __builtin_mul_overflow(d, constant, &out); break;
    default: break;
  }
  if (overflow) return std::nullopt;
  return out;
}

std::optional<ShapeEntry> parse_shape_entry(std::string_view text, std::string* why) {
  const std::string_view s = trim(text);
  if (auto literal = parse_count(s)) return ShapeEntry{"", 0, *literal};
  const std::size_t at = s.find_first_of("+-*");
  ShapeEntry e;
  std::string_view name = trim(s.substr(0, at));
  if (at != std::string_view::npos) {
    e.op = s[at];
    std::string_view rest = s.substr(at + 1);
    std::optional<std::int64_t> k = parse_count(rest);
    if (!k && e.op == '*') {  // "2*N" reads as naturally as "N*2"
      if (auto left = parse_count(name)) {
        k = left;
        name = trim(rest);
      }
    }
    if (!k) {
      if (why) *why = "expected a dim name, an integer, or NAME+INT, NAME-INT, NAME*INT";
      return std::nullopt;
    }
    e.constant = *k;
  }
  if (!is_identifier(name)) {
    if (why) *why = "expected a dim name, an integer, or NAME+INT, NAME-INT, NAME*INT";
    return std::nullopt;
  }
  e.dim = std::string(name);
  return e;
}

}  // namespace kgate
