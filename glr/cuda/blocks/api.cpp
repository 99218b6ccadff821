// The public entry points (glr/glr_cuda.hpp): check everything on the host, lay the workspace out, launch.
#include <cuda_runtime.h>

#include <string>

#include "../common/setup.hpp"
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

}  // namespace

std::size_t forward_workspace_bytes(const Params& params, const DeviceOffsets& offsets) {
  return WorkspacePlan<float>(setup_sizes(params, offsets, Pass::forward), false, nullptr).bytes;
}
std::size_t backward_workspace_bytes(const Params& params, const DeviceOffsets& offsets) {
  return WorkspacePlan<float>(setup_sizes(params, offsets, Pass::backward), true, nullptr).bytes;
}

void forward(const Params& params, const ForwardTensors& t, const DeviceOffsets& offsets, void* workspace,
             std::size_t workspace_bytes, cudaStream_t stream) {
  const Problem p = setup_forward(params, t, offsets);
  launch_forward(p, place(p, false, workspace, workspace_bytes), stream);
}

void backward(const Params& params, const BackwardTensors& t, const DeviceOffsets& offsets, void* workspace,
              std::size_t workspace_bytes, cudaStream_t stream) {
  const Problem p = setup_backward(params, t, offsets);
  launch_backward(p, place(p, true, workspace, workspace_bytes), stream);
}

void forward(const Params& params, const ForwardTensors& t, const DeviceOffsets& offsets, cudaStream_t stream) {
  const Problem p = setup_forward(params, t, offsets);  // check before allocating
  const std::size_t bytes = WorkspacePlan<float>(p, false, nullptr).bytes;
  StreamBuffer ws(bytes, stream);
  launch_forward(p, place(p, false, ws.get(), bytes), stream);
}

void backward(const Params& params, const BackwardTensors& t, const DeviceOffsets& offsets, cudaStream_t stream) {
  const Problem p = setup_backward(params, t, offsets);
  const std::size_t bytes = WorkspacePlan<float>(p, true, nullptr).bytes;
  StreamBuffer ws(bytes, stream);
  launch_backward(p, place(p, true, ws.get(), bytes), stream);
}

std::int32_t workspace_status(const void* workspace, cudaStream_t stream) {
  std::int32_t status = -1;
  check(cudaMemcpyAsync(&status, workspace, sizeof(status), cudaMemcpyDeviceToHost, stream), "reading the status");
  check(cudaStreamSynchronize(stream), "reading the status");
  return status;
}

}  // namespace glr::cuda
