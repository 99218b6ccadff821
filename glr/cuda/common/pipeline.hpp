// glr/cuda/common/pipeline.hpp: the order of the stages, once, for any Runner: the CUDA launcher
// (blocks/launch.cuh) and the host emulator (emu/emulate.cpp) run exactly this sequence.
//
// A Runner provides
//     template <class Stage> void run(const typename Stage::Args&, std::int64_t gx, int gy, int gz);
//     void clear_status(std::int32_t* status);
// and skips empty grids.
//
// Forward:  [chunk table] cumsum [wy_fwd] state_fwd output [poison]
// Backward: the forward's stages again (nothing is kept from the forward call), then
//           dv_local state_bwd dqkwg wy_bwd [dg] group_reduce [poison]
#pragma once

#include <type_traits>

#include "stages/chunk_table.hpp"
#include "stages/cumsum.hpp"
#include "stages/dg.hpp"
#include "stages/dqkwg.hpp"
#include "stages/dv_local.hpp"
#include "stages/group_reduce.hpp"
#include "stages/output.hpp"
#include "stages/poison.hpp"
#include "stages/state_bwd.hpp"
#include "stages/state_fwd.hpp"
#include "stages/wy_bwd.hpp"
#include "stages/wy_fwd.hpp"

namespace glr::cuda {

template <class Acc, class Runner>
void poison_output(Runner& r, const Work<Acc>& w, const TensorRef& t, std::int64_t e0, std::int64_t e1,
                   std::int64_t e2, std::int64_t e3) {
  if (t.p == nullptr) return;
  const PoisonArgs a{t, {e0, e1, e2, e3}, w.status};
  r.template run<Poison<Acc>>(a, Poison<Acc>::blocks(a), 1, 1);
}

// The forward stages; the backward reruns them with p.o and p.ht null (so they write no output).
template <class Acc, int K, int V, class Runner>
void forward_stages(Runner& r, const Problem& p, const Work<Acc>& w) {
  const StageArgs<Acc> a{p, w};
  r.clear_status(w.status);
  if (p.varlen) r.template run<ChunkTable<Acc>>(a, 1, 1, 1);
  r.template run<Cumsum<Acc>>(a, p.max_chunks, 1, 1);
  if (p.delta) r.template run<WyFwd<Acc, K, V>>(a, p.max_chunks, static_cast<int>(p.HV), 1);
  r.template run<StateFwd<Acc, K, V>>(a, p.N, static_cast<int>(p.HV), StateFwd<Acc, K, V>::kVTiles);
  if (p.o.p) r.template run<OutputFwd<Acc, K, V>>(a, p.max_chunks, static_cast<int>(p.HV), 1);
}

template <class Acc, int K, int V, class Runner>
void forward_pipeline(Runner& r, const Problem& p, const Work<Acc>& w) {
  forward_stages<Acc, K, V>(r, p, w);
  if (!p.varlen) return;
  poison_output(r, w, p.o, p.B, p.T, p.HV, p.V);
  poison_output(r, w, p.ht, p.N, p.HV, p.K, p.V);
}

template <class Acc, int K, int V, class Runner>
void backward_pipeline(Runner& r, const Problem& p, const Work<Acc>& w) {
  Problem f = p;  // the recomputed forward writes workspace only
  f.o = TensorRef{};
  f.ht = TensorRef{};
  forward_stages<Acc, K, V>(r, f, w);
  const StageArgs<Acc> a{p, w};
  const int HV = static_cast<int>(p.HV);
  r.template run<DvLocal<Acc, K, V>>(a, p.max_chunks, HV, 1);
  r.template run<StateBwd<Acc, K, V>>(a, p.N, HV, StateBwd<Acc, K, V>::kVTiles);
  r.template run<Dqkwg<Acc, K, V>>(a, p.max_chunks, HV, 1);
  r.template run<WyBwd<Acc, K, V>>(a, p.max_chunks, HV, 1);
  if (p.gate != kGateNone) r.template run<DgChunk<Acc>>(a, p.max_chunks, 1, 1);
  if (p.gate == kGatePerHead) r.template run<DgHeadReduce<Acc>>(a, p.HV, 1, 1);
  r.template run<GroupReduce<Acc>>(a, GroupReduce<Acc>::blocks(p), 1, 1);
  if (!p.varlen) return;
  poison_output(r, w, p.dq, p.B, p.T, p.H, p.K);
  poison_output(r, w, p.dk, p.B, p.T, p.H, p.K);
  poison_output(r, w, p.dv, p.B, p.T, p.HV, p.V);
  if (p.gate == kGatePerToken) poison_output(r, w, p.dg, p.B, p.T, p.HV, 1);
  if (p.gate == kGatePerHead) poison_output(r, w, p.dg, 1, 1, p.HV, 1);  // [HV]: strides (0, 0, head, 0)
  poison_output(r, w, p.dbeta, p.B, p.T, p.HV, 1);
  poison_output(r, w, p.dh0, p.N, p.HV, p.K, p.V);
}

// Runtime head dims to the compiled ones (Params::validate(gpu) admits exactly these).
template <class F>
void dispatch_dims(int K, int V, F&& f) {
  auto v = [&](auto k) {
    if (V == 64)
      f(k, std::integral_constant<int, 64>{});
    else
      f(k, std::integral_constant<int, 128>{});
  };
  if (K == 64)
    v(std::integral_constant<int, 64>{});
  else
    v(std::integral_constant<int, 128>{});
}

}  // namespace glr::cuda
