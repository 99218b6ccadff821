// The host runner: every grid block by block, every block through HostBlock, shared memory and the
// workspace filled with 0xFF bytes (a NaN in fp32 and fp64) first, so a read of anything no phase wrote
// shows up as NaN in the results.
#include "emulate.hpp"

#include <cstring>

#include "../common/pipeline.hpp"
#include "../common/setup.hpp"
#include "../common/workspace.hpp"

namespace glr::cuda {
namespace {

struct HostRunner {
  EmuOptions opt;

  void clear_status(std::int32_t* status) { *status = 0; }

  template <class Stage>
  void run(const typename Stage::Args& a, std::int64_t gx, int gy, int gz) {
    if (gx <= 0 || gy <= 0 || gz <= 0) return;
    std::vector<double> smem((Stage::smem_bytes() + sizeof(double) - 1) / sizeof(double) + 1);
    const std::int64_t total = gx * gy * gz;
    for (std::int64_t n = 0; n < total; ++n) {
      const std::int64_t id = opt.reverse_blocks ? total - 1 - n : n;
      const BlockIdx bi{id % gx, static_cast<int>((id / gx) % gy), static_cast<int>(id / (gx * gy))};
      std::memset(smem.data(), 0xff, smem.size() * sizeof(double));
      HostBlock blk{Stage::kThreads, opt.descending_threads};
      Stage::run(a, bi, reinterpret_cast<char*>(smem.data()), blk);
    }
  }
};

DeviceOffsets host_offsets(const Params& params, const DeviceOffsets* offsets) {
  if (offsets) return *offsets;
  DeviceOffsets o;
  if (params.varlen()) o.cu_seqlens = params.cu_seqlens.data();
  return o;
}

template <class Acc>
void allocate(EmuRun<Acc>& run, bool backward) {
  const WorkspacePlan<Acc> size(run.problem, backward, nullptr);
  run.workspace_bytes = size.bytes;
  run.storage.assign(size.bytes / sizeof(double) + 1, 0.0);
  std::memset(run.storage.data(), 0xff, run.storage.size() * sizeof(double));
  run.work = WorkspacePlan<Acc>(run.problem, backward, reinterpret_cast<char*>(run.storage.data())).w;
}

}  // namespace

template <class Acc>
EmuRun<Acc> emulate_forward(const Params& params, const ForwardTensors& t, const EmuOptions& opt,
                            const DeviceOffsets* offsets) {
  EmuRun<Acc> run;
  run.problem = setup_forward(params, t, host_offsets(params, offsets), SetupOptions{opt.wide_dtypes});
  allocate(run, false);
  HostRunner r{opt};
  dispatch_dims(run.problem.K, run.problem.V, [&](auto K, auto V) {
    forward_pipeline<Acc, decltype(K)::value, decltype(V)::value>(r, run.problem, run.work);
  });
  return run;
}

template <class Acc>
EmuRun<Acc> emulate_backward(const Params& params, const BackwardTensors& t, const EmuOptions& opt,
                             const DeviceOffsets* offsets) {
  EmuRun<Acc> run;
  run.problem = setup_backward(params, t, host_offsets(params, offsets), SetupOptions{opt.wide_dtypes});
  allocate(run, true);
  HostRunner r{opt};
  dispatch_dims(run.problem.K, run.problem.V, [&](auto K, auto V) {
    backward_pipeline<Acc, decltype(K)::value, decltype(V)::value>(r, run.problem, run.work);
  });
  return run;
}

template EmuRun<float> emulate_forward<float>(const Params&, const ForwardTensors&, const EmuOptions&,
                                              const DeviceOffsets*);
template EmuRun<double> emulate_forward<double>(const Params&, const ForwardTensors&, const EmuOptions&,
                                                const DeviceOffsets*);
template EmuRun<float> emulate_backward<float>(const Params&, const BackwardTensors&, const EmuOptions&,
                                               const DeviceOffsets*);
template EmuRun<double> emulate_backward<double>(const Params&, const BackwardTensors&, const EmuOptions&,
                                                 const DeviceOffsets*);

}  // namespace glr::cuda
