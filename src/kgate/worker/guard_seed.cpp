#include "worker/guard_seed.hpp"

namespace kgate {
namespace {

constexpr std::uint64_t rotl(std::uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

struct SipState {
  std::uint64_t v0, v1, v2, v3;
  void round() {
    v0 += v1, v1 = rotl(v1, 13), v1 ^= v0, v0 = rotl(v0, 32);
    v2 += v3, v3 = rotl(v3, 16), v3 ^= v2;
    v0 += v3, v3 = rotl(v3, 21), v3 ^= v0;
    v2 += v1, v1 = rotl(v1, 17), v1 ^= v2, v2 = rotl(v2, 32);
  }
  void absorb(std::uint64_t m) {
    v3 ^= m;
    round(), round();
    v0 ^= m;
  }
};

}  // namespace

std::uint64_t siphash24_word(std::uint64_t k0, std::uint64_t k1, std::uint64_t word) {
  SipState s{k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull, k0 ^ 0x6c7967656e657261ull,
             k1 ^ 0x7465646279746573ull};
  s.absorb(word);
  s.absorb(std::uint64_t(8) << 56);  // the final block: the message length (8 bytes), no tail bytes
  s.v2 ^= 0xff;
  s.round(), s.round(), s.round(), s.round();
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

std::uint64_t derive_guard_seed(std::uint64_t run_seed) {
  return siphash24_word(run_seed, 0x6b67617465677264ull /* "kgategrd" */, 0x6775617264730001ull);
}

}  // namespace kgate
