#include "backend/invocation.hpp"

#include <cstring>

#include <fmt/format.h>

namespace kgate {

void check_fits(const Layout& l, std::size_t bytes, BufferId id, const char* what) {
  if (l.shape.size() != l.strides.size())
    throw TargetError(fmt::format("{}: layout has {} dims but {} strides", what, l.shape.size(), l.strides.size()));
  if (l.offset < 0) throw TargetError(fmt::format("{}: negative offset {}", what, l.offset));
  for (std::size_t d = 0; d < l.shape.size(); ++d) {
    if (l.shape[d] < 0) throw TargetError(fmt::format("{}: negative extent in dim {}", what, d));
    if (l.strides[d] < 0) throw TargetError(fmt::format("{}: negative stride in dim {}", what, d));
  }
  const std::size_t need = static_cast<std::size_t>(l.storage_elements()) * size_of(l.dtype);
  if (need > bytes)
    throw TargetError(fmt::format("{}: layout needs {} bytes but buffer {} holds {}", what, need, id, bytes));
}

PreparedInvocation::PreparedInvocation(const Invocation& inv, DLDeviceType device, const PayloadOf& payload_of,
                                       int device_id)
    : inv_(&inv), message_(std::make_unique<std::array<char, 1024>>()) {
  (*message_)[0] = '\0';
  const DLDevice dev{device, device_id};
  auto view_of = [&](const TensorArg& a, const char* what) {
    auto* base = static_cast<std::byte*>(payload_of(a.buffer, a.layout, what));
    auto v = std::make_unique<DLView>(base + a.layout.offset * static_cast<std::int64_t>(size_of(a.layout.dtype)),
                                      dev, a.layout);
    views_.push_back(std::move(v));
    return base;
  };
  for (const TensorArg& a : inv.inputs) view_of(a, "input");
  for (const TensorArg& a : inv.outputs) output_bases_.push_back(view_of(a, "output"));
  for (std::size_t i = 0; i < views_.size(); ++i)
    (i < inv.inputs.size() ? inputs_ : outputs_).push_back(views_[i]->tensor());
  for (const auto& [name, value] : inv.attrs) attr_names_.push_back(name);
  for (std::size_t i = 0; i < inv.attrs.size(); ++i) attrs_.push_back({attr_names_[i].c_str(), inv.attrs[i].second});
}

const kgate_call& PreparedInvocation::call(void* stream) {
  call_.abi_version = KGATE_ABI_VERSION;
  call_.n_inputs = static_cast<std::int32_t>(inputs_.size());
  call_.n_outputs = static_cast<std::int32_t>(outputs_.size());
  call_.n_attrs = static_cast<std::int32_t>(attrs_.size());
  call_.inputs = inputs_.data();
  call_.outputs = outputs_.data();
  call_.attrs = attrs_.data();
  call_.stream = stream;
  call_.message = message_->data();
  call_.message_capacity = message_->size();
  return call_;
}

std::string PreparedInvocation::message() const {
  return std::string(message_->data(), strnlen(message_->data(), message_->size()));
}

void PreparedInvocation::set_message(const std::string& m) {
  const std::size_t n = std::min(m.size(), message_->size() - 1);
  std::memcpy(message_->data(), m.data(), n);
  (*message_)[n] = '\0';
}

void PreparedInvocation::poison_outputs(const std::vector<std::byte>& poison) {
  if (poison.empty()) return;
  for (std::size_t i = 0; i < inv_->outputs.size(); ++i) {
    const Layout& l = inv_->outputs[i].layout;
    const std::size_t es = size_of(l.dtype);
    auto* base = static_cast<std::byte*>(output_bases_[i]);
    if (l.contiguous() && poison.size() == es) {  // the common case, without a call per element
      for (std::int64_t k = 0; k < numel(l.shape); ++k) std::memcpy(base + k * static_cast<std::int64_t>(es), poison.data(), es);
      continue;
    }
    for_each_element(l, [&](std::int64_t, std::int64_t off) {
      for (std::size_t b = 0; b < es; ++b) base[off * static_cast<std::int64_t>(es) + b] = poison[b % poison.size()];
    });
  }
}

}  // namespace kgate
