// One invocation made ready to call: DLTensor views, attrs and the message buffer kept alive together.
// Shared by the CPU and CUDA backends; knows nothing about where the memory lives.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kgate/abi.h"
#include "kgate/target.hpp"

namespace kgate {

// Throws TargetError unless `layout` lies inside a payload of `bytes` bytes with non-negative strides.
void check_fits(const Layout& layout, std::size_t bytes, BufferId id, const char* what);

class PreparedInvocation {
 public:
  // payload_of(buffer, layout, what) returns the buffer's payload start (device address for CUDA).
  using PayloadOf = std::function<void*(BufferId, const Layout&, const char*)>;
  PreparedInvocation(const Invocation& inv, DLDeviceType device, const PayloadOf& payload_of, int device_id = 0);
  PreparedInvocation(PreparedInvocation&&) = default;

  // The call struct, with stream set as given.
  const kgate_call& call(void* stream = nullptr);
  const Invocation& invocation() const { return *inv_; }
  void* output_base(std::size_t i) const { return output_bases_[i]; }  // payload start of output i's buffer
  std::string message() const;
  void set_message(const std::string& m);
  // CPU only: fill every output element with `poison` (one element's bytes).
  void poison_outputs(const std::vector<std::byte>& poison);

 private:
  const Invocation* inv_;
  std::vector<std::unique_ptr<DLView>> views_;  // inputs then outputs
  std::vector<DLTensor> inputs_, outputs_;
  std::vector<void*> output_bases_;
  std::vector<std::string> attr_names_;
  std::vector<kgate_attr> attrs_;
  std::unique_ptr<std::array<char, 1024>> message_;
  kgate_call call_{};
};

}  // namespace kgate
