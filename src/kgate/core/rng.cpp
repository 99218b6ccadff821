#include "kgate/rng.hpp"

#include <random>

namespace kgate {

std::uint64_t fresh_seed() {
  std::random_device rd;  // /dev/urandom on Linux
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace kgate
