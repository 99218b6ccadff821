// One entry of a contract shape: a literal ("4"), a dim ("M"), or a dim with one integer step ("N+1" for
// segment offsets, "H*2", "T-1"). Kept this small on purpose: anything richer belongs in a new dim with a
// multiple_of constraint, which the shapes gate can sweep.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kgate/tensor.hpp"

namespace kgate {

struct ShapeEntry {
  std::string dim;            // empty for a literal
  char op = 0;                // 0, '+', '-' or '*'
  std::int64_t constant = 0;  // the literal, or the step applied to the dim

  // The entry's size at dim_value; nullopt when the arithmetic leaves 64 bits (N*4611686018427387904).
  std::optional<std::int64_t> value(std::int64_t dim_value) const;
};

// Parses one entry; on failure returns nullopt and says why in *why.
std::optional<ShapeEntry> parse_shape_entry(std::string_view text, std::string* why);

// Whether text is a name a contract may give a dim, tensor or attr: [A-Za-z_][A-Za-z0-9_]*.
bool is_identifier(std::string_view text);

}  // namespace kgate
