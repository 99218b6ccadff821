// kgate-worker: the child process a WorkerTarget drives. Loads one candidate or oracle library and
// serves it with the backend for the device the library names.
#include "worker/worker_main.hpp"

#ifdef KGATE_HAVE_CUDA
#include "backend/cuda/cuda_backend.hpp"
#endif

int main(int argc, char** argv) {
  std::function<void()> before_sandbox;
#ifdef KGATE_HAVE_CUDA
  before_sandbox = kgate::initialise_cuda_if_present;
#endif
  return kgate::run_worker(argc, argv, [](DLDeviceType device, const kgate::TargetOptions& options)
                                           -> std::unique_ptr<kgate::DeviceBackend> {
    if (device == kDLCPU) return kgate::make_cpu_backend(options);
    // The one place a CUDA backend is chosen: only when this build has one (tools/CMakeLists.txt sets
    // KGATE_HAVE_CUDA when the kgate_cuda library exists); otherwise the library is refused at load.
#ifdef KGATE_HAVE_CUDA
    if (device == kDLCUDA) return kgate::make_cuda_backend(options);
#endif
    return nullptr;
  }, before_sandbox);
}
