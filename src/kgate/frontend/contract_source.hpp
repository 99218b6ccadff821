// Internal to the contract reader: where each field came from, so a check that spans several fields (a
// shape naming an undeclared dim, a spread rule naming an unknown input) still points at a line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "kgate/contract.hpp"

namespace kgate {

// Bounds a contract must keep (docs/cli.md, docs/security.md): a contract file is small, a per-call timeout
// must end a hang, and the largest case of a gate must fit in memory before anything is allocated (that
// limit is the machine's, case_memory_limit() in kgate/contract.hpp, not a constant).
inline constexpr std::size_t kMaxContractBytes = std::size_t(1) << 20;
inline constexpr double kMinTimeoutSeconds = 0.001;
inline constexpr double kMaxTimeoutSeconds = 3600;
// KGATE_CASE_MEMORY below this is a mistake (a value in GiB or MB where bytes were meant), refused.
inline constexpr std::int64_t kMinCaseMemoryBytes = std::int64_t(1) << 20;

class SourceMap {
 public:
  void record(const std::string& field, int line, int column) { at_[field] = {line, column}; }
  // The position of `field`, or of its nearest recorded parent ("inputs[1].shape[0]" -> "inputs[1]").
  std::pair<int, int> find(const std::string& field) const;

 private:
  std::map<std::string, std::pair<int, int>> at_;
};

// The TOML walk: syntax, key names and value types. Fills `where` with every field it read.
Contract read_contract_toml(const std::string& text, const std::string& path, SourceMap& where);

// Everything that needs more than one field to judge: ranges, names that must refer to something
// declared, dtype and domain compatibility, and the case memory against `limit` (bytes <= 0: not checked).
// Throws ContractError at the offending field.
void check_contract(const Contract& contract, const SourceMap& where, const CaseMemoryLimit& limit);

}  // namespace kgate
