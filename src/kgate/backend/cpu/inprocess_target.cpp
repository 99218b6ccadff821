// A Target that calls a function in this process: guarded host buffers, no isolation. For tests and for
// trusted code; candidates go through the worker (src/kgate/worker).
#include "backend/backend.hpp"

namespace kgate {
namespace {

class InProcessTarget final : public Target {
 public:
  InProcessTarget(std::string name, EntryFn fn, const TargetOptions& o)
      : name_(std::move(name)), fn_(std::move(fn)), options_(o), backend_(make_cpu_backend(o)) {}

  std::string describe() const override { return name_ + " (cpu, in-process)"; }
  DLDeviceType device() const override { return kDLCPU; }
  BufferId alloc(std::size_t bytes) override { return backend_->alloc(bytes); }
  void release(BufferId id) override { backend_->release(id); }
  void write(BufferId id, std::size_t offset, std::span<const std::byte> data) override {
    backend_->write(id, offset, data);
  }
  std::vector<std::byte> read(BufferId id, std::size_t offset, std::size_t bytes) override {
    return backend_->read(id, offset, bytes);
  }
  std::vector<GuardViolation> check_guards(BufferId id) override { return backend_->check_guards(id); }
  CallResult call(const CallRequest& request) override { return backend_->invoke(request, fn_); }
  void reset() override { backend_ = make_cpu_backend(options_); }
  bool healthy() const override { return true; }

 private:
  std::string name_;
  EntryFn fn_;
  TargetOptions options_;
  std::unique_ptr<DeviceBackend> backend_;
};

}  // namespace

std::unique_ptr<Target> make_inprocess_target(std::string name, EntryFn fn, const TargetOptions& options) {
  return std::make_unique<InProcessTarget>(std::move(name), std::move(fn), options);
}

}  // namespace kgate
