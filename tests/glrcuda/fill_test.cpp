// The emulated pipeline does not depend on what memory held before anything wrote it. A GPU defines
// neither the contents of a fresh workspace (cudaMallocAsync hands back whatever the pool last held) nor
// of shared memory (the previous block's leftovers), so for every member, shape and layout: runs with the
// workspace, shared memory and outputs filled with NaN bytes, zeros or random finite values, with threads
// and blocks in reverse order, with every block of a launch seeing the workspace as it was before the
// launch, and (one case) with every thread of a phase seeing shared memory as it was before the phase,
// all give the same bits, and the NaN fill never reaches an output.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "case.hpp"
#include "shapes.hpp"

namespace glr::cudatest {
namespace {

using cuda::EmuFill;

Results run(const Case& c, bool backward, const cuda::EmuOptions& opt, const EmuFill& out_fill) {
  CallTensors t = make_call(c);
  std::uint64_t stream = 77;
  for (HostTensor* h : {&t.o, &t.ht, &t.dq, &t.dk, &t.dv, &t.dg, &t.dbeta, &t.dh0})
    if (!h->empty()) cuda::fill_memory(h->storage.data(), h->bytes(), out_fill, 4, stream++);
  if (!backward)
    cuda::emulate_forward<float>(c.call, t.forward(), opt);
  else
    cuda::emulate_backward<float>(c.call, t.backward(), opt);
  return t.read(backward);
}

struct Variant {
  const char* name;
  cuda::EmuOptions opt;
  EmuFill out;
};

std::vector<Variant> variants(std::uint64_t seed) {
  std::vector<Variant> v;
  {
    Variant x{"random workspace", {}, {}};
    x.opt.workspace_fill = {EmuFill::random, seed};
    v.push_back(x);
  }
  {
    Variant x{"random shared memory", {}, {}};
    x.opt.smem_fill = {EmuFill::random, seed + 1};
    v.push_back(x);
  }
  v.push_back({"random outputs", {}, {EmuFill::random, seed + 2}});
  {
    Variant x{"zeros everywhere, threads and blocks reversed", {}, {EmuFill::zero, 0}};
    x.opt.workspace_fill = x.opt.smem_fill = {EmuFill::zero, 0};
    x.opt.descending_threads = x.opt.reverse_blocks = true;
    v.push_back(x);
  }
  {
    Variant x{"blocks of a launch concurrent, random workspace", {}, {}};
    x.opt.concurrent_blocks = true;
    x.opt.workspace_fill = {EmuFill::random, seed + 3};
    v.push_back(x);
  }
  return v;
}

TEST(EmuFill, ResultsDoNotDependOnUnwrittenMemory) {
  std::uint64_t salt = 300;
  for (Member m : kMembers)
    for (const Shape& s : emulation_shapes())
      for (Layout l : {Layout{}, Layout{true, true}}) {
        const Case c = make_case(m, s, {}, l, test_seed(salt++));
        for (bool backward : {false, true}) {
          const Results ref = run(c, backward, {}, {});
          std::size_t nans = 0;
          for (const auto* v : {&ref.o, &ref.ht, &ref.dq, &ref.dk, &ref.dv, &ref.dg, &ref.dbeta, &ref.dh0})
            for (double x : *v) nans += std::isnan(x);
          EXPECT_EQ(nans, 0u) << "the NaN fill reached an output: " << c.describe()
                              << (backward ? " backward" : " forward");
          for (const Variant& v : variants(salt * 16))
            EXPECT_EQ(diff_results(run(c, backward, v.opt, v.out), ref), "")
                << v.name << " vs NaN bytes: " << c.describe() << (backward ? " backward" : " forward");
        }
      }
}

// The slow one: shared memory as every thread of a phase saw it before the phase, so a read of what
// another thread writes in the same phase (a race on the GPU) reads the old value and changes the bits.
TEST(EmuFill, NoThreadReadsSharedMemoryAnotherWritesInTheSamePhase) {
  for (Member m : {Member::gated_deltanet, Member::mamba2}) {
    const Case c = make_case(m, emulation_shapes()[0], {}, {}, test_seed(390));
    for (bool backward : {false, true}) {
      const Results ref = run(c, backward, {}, {});
      cuda::EmuOptions o;
      o.concurrent_threads = true;
      EXPECT_EQ(diff_results(run(c, backward, o, {}), ref), "") << c.describe() << (backward ? " backward" : " forward");
    }
  }
}

}  // namespace
}  // namespace glr::cudatest
