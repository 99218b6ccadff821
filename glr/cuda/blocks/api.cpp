// The public entry points (glr/glr_cuda.hpp): check everything on the host, lay the workspace out, launch.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "../common/setup.hpp"
#include "../sm90/backward.hpp"
#include "../sm90/forward.hpp"
#include "../common/workspace.hpp"
#include "glr/glr_cuda.hpp"
#include "launches.hpp"

namespace glr::cuda {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw CudaError(std::string("glr cuda: ") + what + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

Work<float> place(const Problem& p, bool backward, void* workspace, std::size_t bytes) {
  const WorkspacePlan<float> need(p, backward, nullptr);
  if (workspace == nullptr) throw InvalidArgument("workspace", "is null");
  if (reinterpret_cast<std::uintptr_t>(workspace) % kWorkspaceAlign != 0)
    throw InvalidArgument("workspace", "must be " + std::to_string(kWorkspaceAlign) + "-byte aligned");
  if (bytes < need.bytes)
    throw InvalidArgument("workspace", std::to_string(bytes) + " bytes given, " + std::to_string(need.bytes) +
                                           " needed (see " + (backward ? "backward" : "forward") +
                                           "_workspace_bytes)");
  return WorkspacePlan<float>(p, backward, static_cast<char*>(workspace)).w;
}

// Stream-ordered scratch: allocated and freed on the caller's stream, never synchronised.
class StreamBuffer {
 public:
  StreamBuffer(std::size_t bytes, cudaStream_t s) : stream_(s) {
    check(cudaMallocAsync(&ptr_, bytes, s), "cudaMallocAsync of the workspace");
  }
  ~StreamBuffer() { cudaFreeAsync(ptr_, stream_); }
  StreamBuffer(const StreamBuffer&) = delete;
  StreamBuffer& operator=(const StreamBuffer&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
  cudaStream_t stream_;
};

// GLR_FORWARD_PATH / GLR_BACKWARD_PATH: "blocks" forces the block programs; unset, empty or "auto" lets
// forward_path / backward_path choose.
bool forced_blocks(const char* variable = "GLR_FORWARD_PATH") {
  const char* e = std::getenv(variable);
  if (e == nullptr || *e == '\0' || std::strcmp(e, "auto") == 0) return false;
  if (std::strcmp(e, "blocks") == 0) return true;
  throw InvalidArgument(variable, std::string("is '") + e + "'; use 'blocks' or 'auto'");
}

// The current device is sm_90 (the sm90 kernels are built for sm_90a, which runs there only), or why not.
std::string device_refusal() {
  int dev = 0, major = 0, minor = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), "reading the compute capability");
  check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev), "reading the compute capability");
  if (major == 9 && minor == 0) return "";
  return "device " + std::to_string(dev) + " is sm_" + std::to_string(major) + std::to_string(minor) + ", not sm_90";
}

// p from setup_forward.
ForwardChoice choose(const Problem& p, const ForwardOptions& options = {}) {
  if (forced_blocks()) return {ForwardPath::blocks, "forced by GLR_FORWARD_PATH=blocks"};
  if (options.force_blocks) return {ForwardPath::blocks, "forced by ForwardOptions::force_blocks"};
  std::string why = sm90::forward_refusal(p);
  if (why.empty()) why = device_refusal();
  if (!why.empty()) return {ForwardPath::blocks, "sm90 forward not taken: " + why};
  return {ForwardPath::sm90, "sm90 tensor-core forward: bf16, K = V = " + std::to_string(p.K) + ", dense layouts, sm_90 device"};
}

// Saved::key: what the saved wy outputs were made for (glr_cuda.hpp Saved); word 0 a nonzero tag, so all 0 is
// "nothing saved". Absent g or beta count as dtype -1.
using SavedKey = std::array<std::int64_t, kSavedKeyWords>;
SavedKey saved_key(const Problem& p) {
  return {0x474c5231,  // "GLR1"
          p.B,
          p.T,
          p.H,
          p.HV,
          p.varlen ? p.N : 0,
          p.K,
          p.V,
          p.delta,
          p.gate,
          p.gate != kGateNone ? static_cast<std::int64_t>(p.g.dt) : -1,
          p.delta ? static_cast<std::int64_t>(p.beta.dt) : -1};
}
std::string describe(const SavedKey& k) {
  return "B " + std::to_string(k[1]) + " T " + std::to_string(k[2]) + " H " + std::to_string(k[3]) + " HV " +
         std::to_string(k[4]) + " N " + std::to_string(k[5]) + " K " + std::to_string(k[6]) + " V " +
         std::to_string(k[7]) + " delta " + std::to_string(k[8]) + " gate " + std::to_string(k[9]) + " g dtype " +
         std::to_string(k[10]) + " beta dtype " + std::to_string(k[11]);
}
void check_saved_data(const Saved& s) {
  if (s.data == nullptr) throw InvalidArgument("saved", "data is null");
}

void forward_on(const Problem& p, void* workspace, std::size_t bytes, cudaStream_t stream,
                const ForwardOptions& options = {}) {
  const ForwardChoice c = choose(p, options);
  if (std::getenv("GLR_FORWARD_LOG") != nullptr) std::fprintf(stderr, "glr forward: %s (%s)\n", name_of(c.path), c.reason.c_str());
  Saved* const save = options.save;
  if (save) std::fill(std::begin(save->key), std::end(save->key), 0);  // nothing saved until the launch is in
  if (c.path == ForwardPath::sm90) {
    if (workspace == nullptr) throw InvalidArgument("workspace", "is null");
    if (reinterpret_cast<std::uintptr_t>(workspace) % kWorkspaceAlign != 0)
      throw InvalidArgument("workspace", "must be " + std::to_string(kWorkspaceAlign) + "-byte aligned");
    if (save) check_saved_data(*save);
    sm90::launch_forward(p, workspace, bytes, stream, save ? save->data : nullptr, save ? save->bytes : 0);
    if (save) {
      const SavedKey k = saved_key(p);
      std::copy(k.begin(), k.end(), save->key);
    }
  } else {
    launch_forward(p, place(p, false, workspace, bytes), stream);  // save->key stays 0: the backward recomputes
  }
}

void check_workspace_pointer(const void* workspace) {
  if (workspace == nullptr) throw InvalidArgument("workspace", "is null");
  if (reinterpret_cast<std::uintptr_t>(workspace) % kWorkspaceAlign != 0)
    throw InvalidArgument("workspace", "must be " + std::to_string(kWorkspaceAlign) + "-byte aligned");
}

// p from setup_backward.
BackwardChoice choose_backward(const Problem& p, const BackwardOptions& options) {
  if (forced_blocks("GLR_BACKWARD_PATH")) return {BackwardPath::blocks, "forced by GLR_BACKWARD_PATH=blocks"};
  if (options.force_blocks) return {BackwardPath::blocks, "forced by BackwardOptions::force_blocks"};
  std::string why = sm90::backward_refusal(p);
  if (why.empty()) why = device_refusal();
  if (!why.empty()) return {BackwardPath::blocks, "sm90 backward not taken: " + why};
  return {BackwardPath::sm90, std::string("sm90 tensor-core backward: ") +
                                  (p.gate == kGateNone ? "deltanet (g = 0)" : "gated_deltanet") +
                                  ", bf16, K = V = " + std::to_string(p.K) + ", HV a multiple of H, dense layouts, sm_90 device"};
}

std::size_t backward_bytes(const Problem& p, BackwardPath path) {
  return path == BackwardPath::sm90 ? sm90::backward_workspace_bytes(p) : WorkspacePlan<float>(p, true, nullptr).bytes;
}

void backward_on(const Problem& p, void* workspace, std::size_t bytes, cudaStream_t stream,
                 const BackwardOptions& options) {
  const BackwardChoice c = choose_backward(p, options);
  if (std::getenv("GLR_BACKWARD_LOG") != nullptr)
    std::fprintf(stderr, "glr backward: %s (%s)\n", name_of(c.path), c.reason.c_str());
  if (c.path == BackwardPath::sm90) {
    check_workspace_pointer(workspace);
    const Saved* const saved = options.saved;
    const bool use = saved && std::any_of(std::begin(saved->key), std::end(saved->key), [](std::int64_t w) { return w != 0; });
    if (use) {  // a key all 0: nothing was saved, the wy kernel runs here
      SavedKey k;
      std::copy(std::begin(saved->key), std::end(saved->key), k.begin());
      if (k != saved_key(p))
        throw InvalidArgument("saved", "made for " + describe(k) + ", not this backward's " + describe(saved_key(p)));
      check_saved_data(*saved);
    }
    sm90::launch_backward(p, workspace, bytes, stream, use ? saved->data : nullptr, use ? saved->bytes : 0);
  } else {  // the block programs recompute everything: options.saved is not read
    launch_backward(p, place(p, true, workspace, bytes), stream);
  }
}

}  // namespace

const char* name_of(ForwardPath p) { return p == ForwardPath::sm90 ? "sm90" : "blocks"; }
const char* name_of(BackwardPath p) { return p == BackwardPath::sm90 ? "sm90" : "blocks"; }

BackwardChoice backward_path(const Params& params, const BackwardTensors& t, const DeviceOffsets& offsets,
                             const BackwardOptions& options) {
  return choose_backward(setup_backward(params, t, offsets), options);
}

ForwardChoice forward_path(const Params& params, const ForwardTensors& t, const DeviceOffsets& offsets,
                           const ForwardOptions& options) {
  return choose(setup_forward(params, t, offsets), options);
}

std::size_t forward_workspace_bytes(const Params& params, const DeviceOffsets& offsets, ForwardPath path) {
  const Problem p = setup_sizes(params, offsets, Pass::forward);
  return path == ForwardPath::sm90 ? sm90::forward_workspace_bytes(p) : WorkspacePlan<float>(p, false, nullptr).bytes;
}

std::size_t forward_workspace_bytes(const Params& params, const DeviceOffsets& offsets) {
  const Problem p = setup_sizes(params, offsets, Pass::forward);
  return std::max(WorkspacePlan<float>(p, false, nullptr).bytes, sm90::forward_workspace_bytes(p));
}
std::size_t saved_bytes(const Params& params, const DeviceOffsets& offsets) {
  return sm90::saved_bytes(setup_sizes(params, offsets, Pass::forward));
}

std::size_t backward_workspace_bytes(const Params& params, const DeviceOffsets& offsets) {
  const Problem p = setup_sizes(params, offsets, Pass::backward);
  return std::max(backward_bytes(p, BackwardPath::blocks), backward_bytes(p, BackwardPath::sm90));
}
std::size_t backward_workspace_bytes(const Params& params, const DeviceOffsets& offsets, BackwardPath path) {
  return backward_bytes(setup_sizes(params, offsets, Pass::backward), path);
}

void forward(const Params& params, const ForwardTensors& t, const DeviceOffsets& offsets, void* workspace,
             std::size_t workspace_bytes, cudaStream_t stream, const ForwardOptions& options) {
  const Problem p = setup_forward(params, t, offsets);
  forward_on(p, workspace, workspace_bytes, stream, options);
}

void backward(const Params& params, const BackwardTensors& t, const DeviceOffsets& offsets, void* workspace,
              std::size_t workspace_bytes, cudaStream_t stream, const BackwardOptions& options) {
  backward_on(setup_backward(params, t, offsets), workspace, workspace_bytes, stream, options);
}

void forward(const Params& params, const ForwardTensors& t, const DeviceOffsets& offsets, cudaStream_t stream,
             const ForwardOptions& options) {
  const Problem p = setup_forward(params, t, offsets);  // check before allocating
  const bool fast = choose(p, options).path == ForwardPath::sm90;
  const std::size_t bytes = fast ? sm90::forward_workspace_bytes(p) : WorkspacePlan<float>(p, false, nullptr).bytes;
  StreamBuffer ws(bytes, stream);
  forward_on(p, ws.get(), bytes, stream, options);
}

void backward(const Params& params, const BackwardTensors& t, const DeviceOffsets& offsets, cudaStream_t stream,
              const BackwardOptions& options) {
  const Problem p = setup_backward(params, t, offsets);  // check before allocating
  const std::size_t bytes = backward_bytes(p, choose_backward(p, options).path);
  StreamBuffer ws(bytes, stream);
  backward_on(p, ws.get(), bytes, stream, options);
}

std::int32_t workspace_status(const void* workspace, cudaStream_t stream) {
  std::int32_t status = -1;
  check(cudaMemcpyAsync(&status, workspace, sizeof(status), cudaMemcpyDeviceToHost, stream), "reading the status");
  check(cudaStreamSynchronize(stream), "reading the status");
  return status;
}

}  // namespace glr::cuda
