// The default input source (the contract's declared domains) and the check every draw passes.
#include "kgate/source.hpp"

#include <fmt/format.h>

#include "kgate/inputs.hpp"

namespace kgate {
namespace {

class ContractSource final : public InputSource {
 public:
  explicit ContractSource(const Contract& c) : contract_(c) {}
  std::string describe() const override { return "the contract's domains"; }
  std::vector<HostArray> draw(const Bindings& b, std::uint64_t seed) override {
    return generate_inputs(contract_, b, Stream(seed), Distribution::contract);
  }
  bool is_contract_domain() const override { return true; }

 private:
  const Contract& contract_;
};

}  // namespace

std::unique_ptr<InputSource> make_contract_source(const Contract& c) { return std::make_unique<ContractSource>(c); }

void check_draw(const Contract& c, const Bindings& b, const std::vector<HostArray>& arrays, const std::string& who) {
  if (arrays.size() != c.inputs.size())
    throw SourceError(fmt::format("{} drew {} inputs at {}; contract {} has {}", who, arrays.size(), to_string(b),
                                  c.name, c.inputs.size()));
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    const TensorSpec& s = c.inputs[i];
    const Shape want = s.resolve(b);
    if (arrays[i].dtype() != s.dtype || arrays[i].shape() != want)
      throw SourceError(fmt::format("{} drew input {} as {} {} at {}; the contract says {} {}", who, s.name,
                                    name_of(arrays[i].dtype()), shape_string(arrays[i].shape()), to_string(b),
                                    name_of(s.dtype), shape_string(want)));
  }
}

}  // namespace kgate
