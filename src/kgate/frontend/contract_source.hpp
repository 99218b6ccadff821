// Internal to the contract reader: where each field came from, so a check that spans several fields (a
// shape naming an undeclared dim, a spread rule naming an unknown input) still points at a line.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "kgate/contract.hpp"

namespace kgate {

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
// declared, dtype and domain compatibility. Throws ContractError at the offending field.
void check_contract(const Contract& contract, const SourceMap& where);

}  // namespace kgate
