// The driver <-> worker protocol: framed messages over a stream socket, bulk bytes in a shared arena.
//
// Every command gets exactly one reply (ok or error), so the driver always knows what it is waiting
// for. The driver treats everything the worker sends as hostile: lengths, counts, dtypes and shapes are
// checked against what it asked for, and anything malformed is a ProtocolError, reported as a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "kgate/target.hpp"

namespace kgate::wire {

class ProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Op : std::uint32_t {
  // driver -> worker
  alloc = 1,         // u64 bytes                       -> ok: u32 id
  release = 2,       // u32 id                          -> ok
  write = 3,         // u32 id, u64 offset, u64 bytes   (data at arena[0, bytes)) -> ok
  read = 4,          // u32 id, u64 offset, u64 bytes   -> ok (data at arena[0, bytes))
  check_guards = 5,  // u32 id                          -> ok: guards
  call = 6,          // CallRequest                     -> ok: CallResult, outputs packed in the arena
  reset = 7,         // drop every buffer               -> ok
  quit = 8,
  setup = 9,         // u64 guard seed: sent first, before the worker loads anything; never in its argv
  // worker -> driver
  hello = 100,  // u8 loaded; then i32 device, or the load error's message
  ok = 101,
  error = 102,  // string: the TargetError the command raised
};

constexpr std::uint32_t kMagic = 0x6b67770a;             // "kgw\n": catches a stray writer on the channel
constexpr std::size_t kMaxPayload = std::size_t(64) << 20;  // metadata only; tensor bytes go through the arena
constexpr std::size_t kHeaderBytes = 16;                  // u32 magic, u32 op, u64 payload bytes

struct Frame {
  Op op{};
  std::vector<std::byte> payload;
};

class Encoder {
 public:
  Encoder& u8(std::uint8_t v) { return raw(&v, 1); }
  Encoder& u32(std::uint32_t v) { return raw(&v, 4); }
  Encoder& i32(std::int32_t v) { return raw(&v, 4); }
  Encoder& u64(std::uint64_t v) { return raw(&v, 8); }
  Encoder& i64(std::int64_t v) { return raw(&v, 8); }
  Encoder& f64(double v) { return raw(&v, 8); }
  Encoder& str(const std::string& s);
  Encoder& bytes(std::span<const std::byte> b);
  Encoder& layout(const Layout& l);
  std::vector<std::byte> take() { return std::move(buf_); }

 private:
  Encoder& raw(const void* p, std::size_t n);
  std::vector<std::byte> buf_;
};

class Decoder {
 public:
  explicit Decoder(std::span<const std::byte> data) : data_(data) {}
  std::uint8_t u8() { return get<std::uint8_t>(); }
  std::uint32_t u32() { return get<std::uint32_t>(); }
  std::int32_t i32() { return get<std::int32_t>(); }
  std::uint64_t u64() { return get<std::uint64_t>(); }
  std::int64_t i64() { return get<std::int64_t>(); }
  double f64() { return get<double>(); }
  std::string str();
  std::vector<std::byte> bytes();
  Layout layout();
  // A count of items each at least `min_item_bytes` long: rejects counts the remaining bytes cannot hold,
  // so a hostile count never turns into a huge allocation.
  std::uint32_t count(std::size_t min_item_bytes);
  void finish() const;  // throws unless every byte was consumed

 private:
  template <typename T>
  T get() {
    T v;
    take(&v, sizeof v);
    return v;
  }
  void take(void* out, std::size_t n);
  std::span<const std::byte> data_;
  std::size_t pos_ = 0;
};

// Call requests and results. The worker packs each output's bytes into the arena and sends where.
void encode_request(Encoder& e, const CallRequest& r);
CallRequest decode_request(Decoder& d);

struct OutputPlacement {
  DType dtype{};
  Shape shape;
  std::uint64_t offset = 0, bytes = 0;  // in the arena
};
struct ResultHeader {
  CallResult result;  // outputs empty; filled by the driver from `placements`
  std::vector<std::vector<OutputPlacement>> placements;  // per invocation, per output
};
void encode_result(Encoder& e, const CallResult& r, const std::vector<std::vector<OutputPlacement>>& placements);
ResultHeader decode_result(Decoder& d);

void encode_guards(Encoder& e, const std::vector<GuardViolation>& g);
std::vector<GuardViolation> decode_guards(Decoder& d);

}  // namespace kgate::wire
