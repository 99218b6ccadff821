// The guard seed a worker receives, derived from the run's seed by a one-way function. The worker (and so
// the candidate) necessarily holds its guard seed; it must not be able to compute the run's seed from it,
// which would predict every input and case of the run. A bijective mixer (the RNG's child keys) can be
// inverted; SipHash-2-4 keyed by the run seed cannot, short of trying all 2^64 seeds.
#pragma once

#include <cstdint>

namespace kgate {

std::uint64_t derive_guard_seed(std::uint64_t run_seed);

// SipHash-2-4 of one 64-bit word under the key (k0, k1); exposed for its test vector.
std::uint64_t siphash24_word(std::uint64_t k0, std::uint64_t k1, std::uint64_t word);

}  // namespace kgate
