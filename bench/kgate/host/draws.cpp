// Prints a hash of drawn inputs (3M elements; f32, bf16, f16 x every distribution) and their reference's rms
// and largest magnitude: built against two kgate_core libraries (same_draws.sh), the outputs must match.
#include <cstdio>
#include <cstring>
#include "kgate/inputs.hpp"
#include "kgate/compare.hpp"
using namespace kgate;
int main() {
  const std::int64_t n = 3000000;
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    for (Distribution d : {Distribution::contract, Distribution::wide, Distribution::small, Distribution::uniform}) {
      TensorSpec spec; spec.name = "x"; spec.dtype = t; spec.shape = {"N"};
      HostArray a = generate_input(spec, {n}, Bindings{{"N", n}}, Stream(0x1234567), d);
      std::uint64_t h = 1469598103934665603ull;
      for (std::size_t i = 0; i < a.nbytes(); ++i) h = (h ^ static_cast<unsigned char>(a.data()[i])) * 1099511628211ull;
      Reference r = make_reference(HostArray::from_f64(DType::f64, {n}, a.to_f64()), t);
      std::uint64_t rb; std::memcpy(&rb, &r.rms, 8);
      std::printf("%s %s %016llx rms %016llx max %.17g\n", name_of(t), to_string(d), (unsigned long long)h, (unsigned long long)rb, r.max_abs);
    }
  }
}
