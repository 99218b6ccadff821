// kgate/rng.hpp: counter-based random numbers, reproducible from one printed seed.
//
// Every random tensor kgate makes is a *stream*: a 64-bit key derived from the run's seed and a path of
// labels (gate, case, tensor). Element i of a stream is a pure function of (key, i), so the same values come
// out in any order or thread count. The mixing functions are host/device: the integer and uniform streams are
// bit-identical on the GPU; normals go through log/cos, whose last bit may differ between libm and CUDA.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

#if defined(__CUDACC__)
#define KGATE_HD __host__ __device__ inline
#else
#define KGATE_HD inline
#endif

namespace kgate {

// SplitMix64's finaliser: a bijective 64-bit mix with good avalanche.
KGATE_HD std::uint64_t mix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The i-th 64 random bits of stream `key`.
KGATE_HD std::uint64_t stream_bits(std::uint64_t key, std::uint64_t i) { return mix64(key ^ mix64(i)); }

// Uniform in [0, 1) with 53 random bits.
KGATE_HD double stream_uniform(std::uint64_t key, std::uint64_t i) {
  return static_cast<double>(stream_bits(key, i) >> 11) * 0x1.0p-53;
}

// Standard normal by Box-Muller over the pair (2i, 2i+1) of the stream.
KGATE_HD double stream_normal(std::uint64_t key, std::uint64_t i) {
  const double u1 = 1.0 - stream_uniform(key, 2 * i);  // (0, 1]
  const double u2 = stream_uniform(key, 2 * i + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// A stream key: the run's seed, refined by labels. Derivation is deterministic and order-sensitive.
class Stream {
 public:
  constexpr explicit Stream(std::uint64_t key) : key_(key) {}
  std::uint64_t key() const { return key_; }

  Stream child(std::uint64_t index) const { return Stream(mix64(key_ ^ mix64(index + 0x632be59bd9b4e019ull))); }
  Stream child(std::string_view label) const {
    std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the label, then mixed
    for (char c : label) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
    return child(h);
  }

  std::uint64_t bits(std::uint64_t i) const { return stream_bits(key_, i); }
  double uniform(std::uint64_t i) const { return stream_uniform(key_, i); }
  double normal(std::uint64_t i) const { return stream_normal(key_, i); }
  // Uniform integer in [lo, hi] (inclusive); the tiny modulo bias is irrelevant for test inputs.
  std::int64_t integer(std::uint64_t i, std::int64_t lo, std::int64_t hi) const {
    const std::uint64_t span = static_cast<std::uint64_t>(hi - lo) + 1;
    return lo + static_cast<std::int64_t>(span == 0 ? bits(i) : bits(i) % span);
  }

 private:
  std::uint64_t key_;
};

// A sequential generator over a stream, for code that draws an unknown number of values.
class Rng {
 public:
  explicit Rng(Stream s) : stream_(s) {}
  explicit Rng(std::uint64_t seed) : stream_(seed) {}
  std::uint64_t next_bits() { return stream_.bits(counter_++); }
  double uniform() { return stream_.uniform(counter_++); }
  double normal() { return stream_.normal(counter_++); }
  std::int64_t integer(std::int64_t lo, std::int64_t hi) { return stream_.integer(counter_++, lo, hi); }
  const Stream& stream() const { return stream_; }

 private:
  Stream stream_;
  std::uint64_t counter_ = 0;
};

// A seed nobody can predict (from the OS), for runs where the user fixes none.
std::uint64_t fresh_seed();

}  // namespace kgate
