// The host runner: every grid block by block, every block through HostBlock, shared memory and the
// workspace filled first (EmuOptions: 0xFF bytes, a NaN in fp32 and fp64, by default; zeros or random
// finite values on request), so a read of anything no phase wrote shows up as a NaN in the results or as
// a difference between two runs with different fills.
#include "emulate.hpp"

#include <cstring>
#include <optional>

#include "../common/pipeline.hpp"
#include "../common/setup.hpp"
#include "../common/workspace.hpp"

namespace glr::cuda {

namespace {
// splitmix64: a small, fixed, platform-independent generator (the fills must be reproducible).
std::uint64_t mix(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace

void fill_memory(void* p, std::size_t bytes, const EmuFill& fill, std::size_t word, std::uint64_t stream) {
  unsigned char* b = static_cast<unsigned char*>(p);
  if (fill.kind == EmuFill::nan_bytes) {
    std::memset(b, 0xff, bytes);
    return;
  }
  if (fill.kind == EmuFill::zero) {
    std::memset(b, 0, bytes);
    return;
  }
  std::uint64_t state = fill.seed * 0x2545f4914f6cdd1dull + stream * 0x9e3779b97f4a7c15ull + 1;
  std::size_t i = 0;
  for (; i + word <= bytes; i += word) {
    // a value in (-4, 4) with 30 random bits: finite, of an ordinary size, different in every word
    const double x = (static_cast<double>(mix(state) >> 34) / 1073741824.0 - 0.5) * 8.0;
    if (word == sizeof(double)) {
      std::memcpy(b + i, &x, sizeof(double));
    } else {
      const float f = static_cast<float>(x);
      std::memcpy(b + i, &f, sizeof(float));
    }
  }
  for (; i < bytes; ++i) b[i] = static_cast<unsigned char>(mix(state));
}

namespace {

template <class Acc>
struct HostRunner {
  EmuOptions opt;
  char* ws = nullptr;          // the workspace (for concurrent_blocks)
  std::size_t ws_bytes = 0;
  std::uint64_t launches = 0;  // every block of every launch draws its own shared-memory fill

  void clear_status(std::int32_t* status) { *status = 0; }

  template <class Stage>
  void run(const typename Stage::Args& a, std::int64_t gx, int gy, int gz) {
    if (gx <= 0 || gy <= 0 || gz <= 0) return;
    std::vector<double> smem((Stage::smem_bytes() + sizeof(double) - 1) / sizeof(double) + 1);
    const std::int64_t total = gx * gy * gz;
    std::optional<ConcurrentRegion> workspace;
    if (opt.concurrent_blocks) workspace.emplace(ws, ws_bytes);
    for (std::int64_t n = 0; n < total; ++n) {
      if (workspace) workspace->begin_writer();
      const std::int64_t id = opt.reverse_blocks ? total - 1 - n : n;
      const BlockIdx bi{id % gx, static_cast<int>((id / gx) % gy), static_cast<int>(id / (gx * gy))};
      fill_memory(smem.data(), smem.size() * sizeof(double), opt.smem_fill, sizeof(Acc),
                  (launches << 32) ^ static_cast<std::uint64_t>(id));
      HostBlock blk{Stage::kThreads, opt.descending_threads};
      if (opt.concurrent_threads) {
        blk.smem = reinterpret_cast<char*>(smem.data());
        blk.smem_bytes = smem.size() * sizeof(double);
        blk.concurrent = true;
      }
      Stage::run(a, bi, reinterpret_cast<char*>(smem.data()), blk);
      if (workspace) workspace->end_writer();
    }
    if (workspace) workspace->finish();
    ++launches;
  }
};

DeviceOffsets host_offsets(const Params& params, const DeviceOffsets* offsets) {
  if (offsets) return *offsets;
  DeviceOffsets o;
  if (params.varlen()) o.cu_seqlens = params.cu_seqlens.data();
  return o;
}

template <class Acc>
void allocate(EmuRun<Acc>& run, bool backward, const EmuFill& fill) {
  const WorkspacePlan<Acc> size(run.problem, backward, nullptr);
  run.workspace_bytes = size.bytes;
  run.storage.assign(size.bytes / sizeof(double) + 1, 0.0);
  fill_memory(run.storage.data(), run.storage.size() * sizeof(double), fill, sizeof(Acc), 0xffffffffull);
  run.work = WorkspacePlan<Acc>(run.problem, backward, reinterpret_cast<char*>(run.storage.data())).w;
}

}  // namespace

template <class Acc>
EmuRun<Acc> emulate_forward(const Params& params, const ForwardTensors& t, const EmuOptions& opt,
                            const DeviceOffsets* offsets) {
  EmuRun<Acc> run;
  run.problem = setup_forward(params, t, host_offsets(params, offsets), SetupOptions{opt.wide_dtypes});
  allocate(run, false, opt.workspace_fill);
  HostRunner<Acc> r{opt, reinterpret_cast<char*>(run.storage.data()), run.storage.size() * sizeof(double)};
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
  allocate(run, true, opt.workspace_fill);
  HostRunner<Acc> r{opt, reinterpret_cast<char*>(run.storage.data()), run.storage.size() * sizeof(double)};
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
