// Buffers for one invocation: inputs scattered into their layouts (gaps filled with a known byte, so a kernel
// that ignores strides reads garbage and a write into a gap is visible), outputs allocated around theirs.
#include <algorithm>

#include <fmt/format.h>

#include "kgate/gate.hpp"

namespace kgate {
namespace {

std::size_t payload_bytes(const Layout& l) {
  // Never zero: a zero-byte buffer has no address to offset from.
  return std::max<std::size_t>(static_cast<std::size_t>(l.storage_elements()) * size_of(l.dtype), 1);
}

}  // namespace

PlacedCall::PlacedCall(Target& t, const std::vector<HostArray>& inputs, const std::vector<Placement>& in,
                       const std::vector<Placement>& out, const Attrs& attrs)
    : target_(t), in_(in), out_(out) {
  if (inputs.size() != in.size())
    throw std::invalid_argument(fmt::format("placement: {} inputs but {} placements", inputs.size(), in.size()));
  inv_.attrs = attrs;
  try {
    for (std::size_t i = 0; i < in.size(); ++i) {
      const Layout& l = in[i].layout;
      if (inputs[i].dtype() != l.dtype || inputs[i].shape() != l.shape)
        throw std::invalid_argument(fmt::format("placement of input {}: {} {} does not match its layout {} {}", i,
                                                name_of(inputs[i].dtype()), shape_string(inputs[i].shape()),
                                                name_of(l.dtype), shape_string(l.shape)));
      if (l.offset == 0 && inputs[i].nbytes() > 0 && l.strides == contiguous_strides(l.shape)) {
        // Dense at offset 0: no gaps to fill, the payload is the array's bytes, written from the array itself.
        const BufferId id = target_.alloc(inputs[i].nbytes());
        inv_.inputs.push_back({id, l});
        target_.write(id, 0, inputs[i].bytes());
        written_.emplace_back();
        lent_.push_back(&inputs[i]);
        continue;
      }
      std::vector<std::byte> payload(payload_bytes(l), in[i].gap_fill);
      inputs[i].scatter(payload, l);
      const BufferId id = target_.alloc(payload.size());
      inv_.inputs.push_back({id, l});
      target_.write(id, 0, payload);
      written_.push_back(std::move(payload));
      lent_.push_back(nullptr);
    }
    for (const Placement& p : out) {
      const std::size_t bytes = payload_bytes(p.layout);
      const BufferId id = target_.alloc(bytes);
      inv_.outputs.push_back({id, p.layout});
      target_.fill(id, 0, bytes, p.gap_fill);
      out_bytes_.push_back(bytes);
    }
  } catch (...) {
    release_all();
    throw;
  }
}

PlacedCall::~PlacedCall() { release_all(); }

void PlacedCall::release_all() {
  auto drop = [&](std::vector<TensorArg>& args) {
    for (const TensorArg& a : args) {
      try {
        target_.release(a.buffer);
      } catch (const std::exception&) {  // reset or dead target: the buffer went with it
      }
    }
    args.clear();
  };
  drop(inv_.inputs);
  drop(inv_.outputs);
}

void PlacedCall::rewrite_input(std::size_t i, const HostArray& values) {
  const std::span<const std::byte> was = input_payload_written(i);
  std::vector<std::byte> payload(was.begin(), was.end());
  values.scatter(payload, in_.at(i).layout);
  target_.write(inv_.inputs[i].buffer, 0, payload);
  written_[i] = std::move(payload);
  lent_[i] = nullptr;
}

void PlacedCall::move_to(std::size_t offset_bytes, const std::vector<HostArray>& inputs) {
  // Input i's payload (values scattered at the new offset) is kept in written_; an output's is its gap fill.
  auto shift = [&](std::vector<Placement>& places, std::vector<TensorArg>& args, const HostArray* values) {
    for (std::size_t i = 0; i < places.size(); ++i) {
      Layout l = places[i].layout;
      const std::size_t es = size_of(l.dtype);
      const std::size_t size = values ? input_payload_written(i).size() : out_bytes_[i];
      if (offset_bytes % es != 0) throw std::invalid_argument(fmt::format("move_to: {} bytes is not a whole element", offset_bytes));
      l.offset = static_cast<std::int64_t>(offset_bytes / es);
      if (static_cast<std::size_t>(l.storage_elements()) * es > size)
        throw std::invalid_argument(fmt::format("move_to: no room for {} bytes of offset", offset_bytes));
      if (values) {
        std::vector<std::byte> payload(size, places[i].gap_fill);
        values[i].scatter(payload, l);
        target_.write(args[i].buffer, 0, payload);
        written_[i] = std::move(payload);
        lent_[i] = nullptr;
      } else {
        target_.fill(args[i].buffer, 0, size, places[i].gap_fill);
      }
      places[i].layout = l;
      args[i].layout = l;
    }
  };
  if (inputs.size() != in_.size()) throw std::invalid_argument("move_to: wrong number of inputs");
  shift(in_, inv_.inputs, inputs.data());
  shift(out_, inv_.outputs, nullptr);
}

namespace {

// A read answered with another size than asked is the target's fault, never something to index past.
std::vector<std::byte> read_exactly(Target& t, BufferId id, std::size_t bytes) {
  std::vector<std::byte> got = t.read(id, 0, bytes);
  if (got.size() != bytes)
    throw TargetError(fmt::format("read of buffer {}: asked for {} bytes, the target gave {}", id, bytes, got.size()));
  return got;
}

}  // namespace

std::vector<std::byte> PlacedCall::input_payload(std::size_t i) const {
  return read_exactly(target_, inv_.inputs.at(i).buffer, input_payload_written(i).size());
}

std::vector<std::byte> PlacedCall::output_prefix(std::size_t i, std::size_t bytes) const {
  return read_exactly(target_, inv_.outputs.at(i).buffer, std::min(bytes, out_bytes_.at(i)));
}

std::string PlacedCall::tensor_of(BufferId id, const Contract& c) const {
  for (std::size_t i = 0; i < inv_.inputs.size() && i < c.inputs.size(); ++i)
    if (inv_.inputs[i].buffer == id) return fmt::format("input {}", c.inputs[i].name);
  for (std::size_t i = 0; i < inv_.outputs.size() && i < c.outputs.size(); ++i)
    if (inv_.outputs[i].buffer == id) return fmt::format("output {}", c.outputs[i].name);
  return fmt::format("buffer {}", id);
}

const Layout* PlacedCall::layout_of(BufferId id) const {
  for (const TensorArg& a : inv_.inputs)
    if (a.buffer == id) return &a.layout;
  for (const TensorArg& a : inv_.outputs)
    if (a.buffer == id) return &a.layout;
  return nullptr;
}

}  // namespace kgate
