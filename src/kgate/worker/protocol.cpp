#include "worker/protocol.hpp"

#include <cstring>

#include <fmt/format.h>

namespace kgate::wire {
namespace {

constexpr std::uint32_t kMaxRank = 64;

DType checked_dtype(std::uint8_t v) {
  if (v >= std::size(kAllDTypes)) throw ProtocolError(fmt::format("unknown dtype code {}", v));
  return static_cast<DType>(v);
}

}  // namespace

Encoder& Encoder::raw(const void* p, std::size_t n) {
  const auto* b = static_cast<const std::byte*>(p);
  buf_.insert(buf_.end(), b, b + n);
  return *this;
}

Encoder& Encoder::str(const std::string& s) {
  u64(s.size());
  return raw(s.data(), s.size());
}

Encoder& Encoder::bytes(std::span<const std::byte> b) {
  u64(b.size());
  return raw(b.data(), b.size());
}

Encoder& Encoder::layout(const Layout& l) {
  u8(static_cast<std::uint8_t>(l.dtype)).u32(static_cast<std::uint32_t>(l.shape.size()));
  for (std::int64_t s : l.shape) i64(s);
  u32(static_cast<std::uint32_t>(l.strides.size()));
  for (std::int64_t s : l.strides) i64(s);
  return i64(l.offset);
}

void Decoder::take(void* out, std::size_t n) {
  if (n > data_.size() - pos_)
    throw ProtocolError(fmt::format("message ends early: {} bytes wanted at {} of {}", n, pos_, data_.size()));
  std::memcpy(out, data_.data() + pos_, n);
  pos_ += n;
}

std::string Decoder::str() {
  const std::uint64_t n = u64();
  if (n > data_.size() - pos_) throw ProtocolError(fmt::format("string of {} bytes in a message of {}", n, data_.size()));
  std::string s(reinterpret_cast<const char*>(data_.data() + pos_), n);
  pos_ += n;
  return s;
}

std::vector<std::byte> Decoder::bytes() {
  const std::uint64_t n = u64();
  if (n > data_.size() - pos_) throw ProtocolError(fmt::format("{} bytes claimed in a message of {}", n, data_.size()));
  std::vector<std::byte> b(data_.begin() + pos_, data_.begin() + pos_ + n);
  pos_ += n;
  return b;
}

std::uint32_t Decoder::count(std::size_t min_item_bytes) {
  const std::uint32_t n = u32();
  if (min_item_bytes > 0 && n > (data_.size() - pos_) / min_item_bytes)
    throw ProtocolError(fmt::format("count {} cannot fit in the {} bytes left", n, data_.size() - pos_));
  return n;
}

Layout Decoder::layout() {
  Layout l;
  l.dtype = checked_dtype(u8());
  const std::uint32_t rank = count(8);
  if (rank > kMaxRank) throw ProtocolError(fmt::format("rank {} is beyond {}", rank, kMaxRank));
  for (std::uint32_t i = 0; i < rank; ++i) l.shape.push_back(i64());
  const std::uint32_t srank = count(8);
  if (srank != rank) throw ProtocolError(fmt::format("{} strides for rank {}", srank, rank));
  for (std::uint32_t i = 0; i < srank; ++i) l.strides.push_back(i64());
  l.offset = i64();
  return l;
}

void Decoder::finish() const {
  if (pos_ != data_.size()) throw ProtocolError(fmt::format("{} stray bytes after the message", data_.size() - pos_));
}

void encode_request(Encoder& e, const CallRequest& r) {
  e.u8(static_cast<std::uint8_t>(r.stream)).bytes(r.poison).u32(static_cast<std::uint32_t>(r.invocations.size()));
  for (const Invocation& inv : r.invocations) {
    for (const auto* args : {&inv.inputs, &inv.outputs}) {
      e.u32(static_cast<std::uint32_t>(args->size()));
      for (const TensorArg& a : *args) e.u32(a.buffer).layout(a.layout);
    }
    e.u32(static_cast<std::uint32_t>(inv.attrs.size()));
    for (const auto& [name, value] : inv.attrs) e.str(name).f64(value);
  }
}

CallRequest decode_request(Decoder& d) {
  CallRequest r;
  const std::uint8_t mode = d.u8();
  if (mode > static_cast<std::uint8_t>(StreamMode::staged_inputs)) throw ProtocolError("unknown stream mode");
  r.stream = static_cast<StreamMode>(mode);
  r.poison = d.bytes();
  const std::uint32_t n = d.count(12);
  for (std::uint32_t i = 0; i < n; ++i) {
    Invocation inv;
    for (auto* args : {&inv.inputs, &inv.outputs}) {
      const std::uint32_t k = d.count(21);  // buffer id + the smallest layout (rank 0)
      for (std::uint32_t j = 0; j < k; ++j) {
        TensorArg a;
        a.buffer = d.u32();
        a.layout = d.layout();
        args->push_back(std::move(a));
      }
    }
    const std::uint32_t k = d.count(16);
    for (std::uint32_t j = 0; j < k; ++j) {
      std::string name = d.str();
      inv.attrs.emplace_back(std::move(name), d.f64());
    }
    r.invocations.push_back(std::move(inv));
  }
  d.finish();
  return r;
}

void encode_guards(Encoder& e, const std::vector<GuardViolation>& g) {
  e.u32(static_cast<std::uint32_t>(g.size()));
  for (const GuardViolation& v : g) e.u32(v.buffer).i64(v.offset).u8(v.expected).u8(v.found);
}

std::vector<GuardViolation> decode_guards(Decoder& d) {
  std::vector<GuardViolation> g(d.count(14));
  for (GuardViolation& v : g) {
    v.buffer = d.u32();
    v.offset = d.i64();
    v.expected = d.u8();
    v.found = d.u8();
  }
  return g;
}

void encode_result(Encoder& e, const CallResult& r, const std::vector<std::vector<OutputPlacement>>& placements) {
  e.u8(static_cast<std::uint8_t>(r.outcome)).str(r.detail).f64(r.seconds);
  e.u32(static_cast<std::uint32_t>(r.results.size()));
  for (std::size_t i = 0; i < r.results.size(); ++i) {
    e.i32(r.results[i].status).str(r.results[i].message).f64(r.results[i].started).f64(r.results[i].finished).u32(static_cast<std::uint32_t>(placements[i].size()));
    for (const OutputPlacement& p : placements[i]) {
      e.u8(static_cast<std::uint8_t>(p.dtype)).u32(static_cast<std::uint32_t>(p.shape.size()));
      for (std::int64_t s : p.shape) e.i64(s);
      e.u64(p.offset).u64(p.bytes);
    }
  }
  encode_guards(e, r.guards);
}

ResultHeader decode_result(Decoder& d) {
  ResultHeader h;
  const std::uint8_t outcome = d.u8();
  if (outcome > static_cast<std::uint8_t>(CallOutcome::timed_out)) throw ProtocolError("unknown call outcome");
  h.result.outcome = static_cast<CallOutcome>(outcome);
  h.result.detail = d.str();
  h.result.seconds = d.f64();
  const std::uint32_t n = d.count(32);
  h.result.results.resize(n);
  h.placements.resize(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    h.result.results[i].status = d.i32();
    h.result.results[i].message = d.str();
    h.result.results[i].started = d.f64();
    h.result.results[i].finished = d.f64();
    const std::uint32_t k = d.count(21);
    for (std::uint32_t j = 0; j < k; ++j) {
      OutputPlacement p;
      p.dtype = checked_dtype(d.u8());
      const std::uint32_t rank = d.count(8);
      if (rank > kMaxRank) throw ProtocolError(fmt::format("rank {} is beyond {}", rank, kMaxRank));
      for (std::uint32_t r = 0; r < rank; ++r) p.shape.push_back(d.i64());
      p.offset = d.u64();
      p.bytes = d.u64();
      h.placements[i].push_back(std::move(p));
    }
  }
  h.result.guards = decode_guards(d);
  d.finish();
  return h;
}

}  // namespace kgate::wire
