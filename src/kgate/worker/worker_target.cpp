// WorkerTarget: a Target whose entry point runs in a kgate-worker child process.
//
// The worker holds only what the driver sends it (the current call's buffers); oracle outputs and
// expected values never leave the driver. Every wait is bounded by the time limit; a worker that
// crashes, hangs or breaks the protocol is killed, the call ends CRASHED or TIMED_OUT, and the target
// stays unhealthy until reset() starts a fresh worker.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "worker/arena.hpp"
#include "worker/process.hpp"
#include "worker/startup.hpp"

namespace kgate {
namespace {

constexpr std::size_t kInitialArena = std::size_t(1) << 20;
// Loading may initialise a CUDA context, which takes seconds: a short per-call limit must not fail it.
constexpr double kMinStartupSeconds = 10.0;

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

class WorkerTarget final : public Target {
 public:
  WorkerTarget(EntrySpec spec, const TargetOptions& options) : spec_(std::move(spec)), options_(options) {
    try {
      exe_ = find_worker_executable();
    } catch (const TargetError& e) {
      throw LoadError(e.what());
    }
    start();  // throws LoadError: the caller learns at once that this library cannot be verified
  }

  ~WorkerTarget() override {
    if (worker_) worker_->terminate(stop_grace());
  }

  // The report's `candidate` line: how the worker was isolated, never claimed where it was not. Without root
  // it keeps the caller's uid outside its namespaces (it reads what kgate reads); unsafe: none at all.
  std::string describe() const override {
    const char* how = !worker_isolated(options_) ? "NOT isolated"
                      : geteuid() == 0          ? "isolated"
                                                : "isolated, as the caller's uid";
    return fmt::format("{}:{} ({}, {})", std::filesystem::path(spec_.library).filename().string(), spec_.symbol,
                       device_ == kDLCUDA ? "cuda" : "cpu", how);
  }
  DLDeviceType device() const override { return device_; }

  BufferId alloc(std::size_t bytes) override {
    const std::vector<std::byte> reply = command(wire::Op::alloc, wire::Encoder().u64(bytes).take(), "alloc");
    wire::Decoder d(reply);
    return checked(d, [&] { return d.u32(); }, "alloc");
  }

  void release(BufferId id) override { command(wire::Op::release, wire::Encoder().u32(id).take(), "release"); }

  void write(BufferId id, std::size_t offset, std::span<const std::byte> data) override {
    require_healthy("write");
    if (!data.empty()) std::memcpy(arena_->reserve(data.size()), data.data(), data.size());
    command(wire::Op::write, wire::Encoder().u32(id).u64(offset).u64(data.size()).take(), "write");
  }

  // The fill goes straight into the shared arena (no payload-sized vector on the way): a write on the wire.
  void fill(BufferId id, std::size_t offset, std::size_t bytes, std::byte value) override {
    require_healthy("write");
    if (bytes > 0) std::memset(arena_->reserve(bytes), static_cast<int>(value), bytes);
    command(wire::Op::write, wire::Encoder().u32(id).u64(offset).u64(bytes).take(), "write");
  }

  std::vector<std::byte> read(BufferId id, std::size_t offset, std::size_t bytes) override {
    command(wire::Op::read, wire::Encoder().u32(id).u64(offset).u64(bytes).take(), "read");
    if (bytes == 0) return {};
    const std::byte* p = view_or_fail(bytes, "read");
    return std::vector<std::byte>(p, p + bytes);
  }

  std::vector<GuardViolation> check_guards(BufferId id) override {
    const std::vector<std::byte> reply = command(wire::Op::check_guards, wire::Encoder().u32(id).take(), "check_guards");
    wire::Decoder d(reply);
    return checked(d, [&] { return wire::decode_guards(d); }, "check_guards");
  }

  CallResult call(const CallRequest& request) override {
    require_healthy("call");
    wire::Encoder e;
    wire::encode_request(e, request);
    const auto t0 = Clock::now();
    const auto deadline = after(options_.timeout_seconds);
    wire::Frame reply;
    WorkerProcess::Event ev = WorkerProcess::Event::died;
    std::string broken;
    try {
      worker_->send({wire::Op::call, e.take()}, deadline);  // if it stopped reading, receive says how it ended
      ev = worker_->receive(reply, deadline);
    } catch (const wire::ProtocolError& p) {
      broken = p.what();
    }
    CallResult r;
    if (broken.empty() && ev == WorkerProcess::Event::frame) {
      if (reply.op == wire::Op::error) throw TargetError(decode_error(reply));  // an invalid request
      try {
        if (reply.op != wire::Op::ok) throw wire::ProtocolError("unexpected reply to a call");
        r = decode_call_result(reply, request);
        worker_->drain_output();
      } catch (const std::exception& p) {  // ProtocolError, or the arena proved shorter than claimed
        broken = p.what();
      }
    }
    if (!broken.empty()) {
      worker_->kill_now();
      r = {};
      r.outcome = CallOutcome::crashed;
      r.detail = "the worker broke the protocol: " + broken;
    } else if (ev == WorkerProcess::Event::died) {
      r.outcome = CallOutcome::crashed;
      r.detail = worker_->death();
      // The isolation's seccomp filter ends the worker with SIGSYS for exactly the calls that can only be
      // aimed at the judge (isolation.hpp): the crash is the finding, and this says what it was.
      r.detail = explain_death(r.detail);
    } else if (ev == WorkerProcess::Event::timed_out) {
      r.outcome = CallOutcome::timed_out;
      r.detail = fmt::format("timeout after {:.1f} s", options_.timeout_seconds);
    }
    if (r.outcome != CallOutcome::completed) {
      // A backend that reports a lost device context has also left this worker unusable.
      unhealthy_ = fmt::format("the worker {} during a call ({})",
                               r.outcome == CallOutcome::timed_out ? "timed out" : "crashed", r.detail);
      // A worker that merely lost its CUDA context still answers quit; under a tool that lets the tool
      // write what it saw before the worker goes (a kill would lose memcheck's record of the crash).
      if (r.outcome == CallOutcome::crashed && !options_.launch_prefix.empty())
        worker_->terminate(stop_grace());
      else
        worker_->kill_now();
      r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    }
    r.output = worker_->output().excerpt();
    r.output_bytes = worker_->output().total();
    worker_->output().clear();
    return r;
  }

  void reset() override {
    if (healthy()) {
      try {
        command(wire::Op::reset, {}, "reset");
        return;
      } catch (const TargetError&) {
        // fall through to a fresh worker
      }
    }
    try {
      start();
    } catch (const std::exception& e) {
      unhealthy_ = fmt::format("a fresh worker did not start: {}", e.what());
    }
  }

  bool healthy() const override { return unhealthy_.empty() && worker_ && worker_->alive(); }

 private:
  std::chrono::milliseconds stop_grace() const {
    return options_.launch_prefix.empty() ? std::chrono::milliseconds(200)
                                          : std::chrono::milliseconds(static_cast<long>(kToolGraceSeconds * 1000));
  }

  void start() {
    if (worker_) {
      if (options_.launch_prefix.empty())
        worker_->kill_now();
      else
        worker_->terminate(stop_grace());
    }
    worker_.reset();
    arena_.reset();
    unhealthy_ = "the worker is starting";
    arena_.emplace(SharedArena::create(kInitialArena));
    std::vector<std::string> args = worker_args("serve", spec_, options_);
    std::string exe = exe_;
    if (!options_.launch_prefix.empty()) {  // a wrapper (compute-sanitizer) that starts the worker itself
      std::vector<std::string> prefix = options_.launch_prefix;
      const std::string n = std::to_string(starts_);
      for (std::string& a : prefix)
        for (std::size_t at = a.find("{start}"); at != std::string::npos; at = a.find("{start}", at + n.size()))
          a.replace(at, 7, n);
      args.insert(args.begin(), exe_);
      args.insert(args.begin(), prefix.begin() + 1, prefix.end());
      exe = prefix.front();
    }
    ++starts_;
    worker_ = std::make_unique<WorkerProcess>(exe, args, arena_->fd(), options_.output_limit, worker_isolated(options_));
    const double startup = std::max(options_.timeout_seconds, kMinStartupSeconds);
    send_setup(*worker_, options_, startup);
    device_ = await_hello(*worker_, spec_, startup);
    unhealthy_.clear();
  }

  void require_healthy(const char* what) const {
    if (!healthy())
      throw TargetError(fmt::format("{}: cannot {}: {}; reset() starts a fresh worker", describe(), what,
                                    unhealthy_.empty() ? "the worker is gone" : unhealthy_));
  }

  std::string decode_error(const wire::Frame& f) const {
    try {
      wire::Decoder d(f.payload);
      std::string m = d.str();
      d.finish();
      return m;
    } catch (const wire::ProtocolError&) {
      return "the worker rejected the request (unreadable reason)";
    }
  }

  // One command and its reply. A worker that dies, hangs or garbles the reply is killed and the
  // target becomes unhealthy; an error the backend raised (a bad buffer id) leaves it healthy.
  std::vector<std::byte> command(wire::Op op, std::vector<std::byte> payload, const char* what) {
    require_healthy(what);
    const auto deadline = after(options_.timeout_seconds);
    wire::Frame reply;
    WorkerProcess::Event ev;
    try {
      worker_->send({op, std::move(payload)}, deadline);
      ev = worker_->receive(reply, deadline);
    } catch (const wire::ProtocolError& p) {
      lose(fmt::format("the worker broke the protocol during {}: {}", what, p.what()));
    }
    if (ev == WorkerProcess::Event::died) lose(fmt::format("the worker died during {}: {}", what, worker_->death()));
    if (ev == WorkerProcess::Event::timed_out)
      lose(fmt::format("the worker did not answer {} within {:.1f} s", what, options_.timeout_seconds));
    if (reply.op == wire::Op::error) throw TargetError(fmt::format("{}: {}", what, decode_error(reply)));
    if (reply.op != wire::Op::ok) lose(fmt::format("the worker broke the protocol during {}: unexpected reply", what));
    return std::move(reply.payload);
  }

  template <typename F>
  auto checked(wire::Decoder& d, F&& decode, const char* what) -> decltype(decode()) {
    try {
      auto v = decode();
      d.finish();
      return v;
    } catch (const wire::ProtocolError& p) {
      lose(fmt::format("the worker broke the protocol during {}: {}", what, p.what()));
    }
  }

  const std::byte* view_or_fail(std::size_t bytes, const char* what) {
    try {
      return arena_->view(bytes);
    } catch (const TargetError& e) {
      lose(fmt::format("the worker broke the protocol during {}: {}", what, e.what()));
    }
  }

  [[noreturn]] void lose(std::string why) {
    worker_->kill_now();
    unhealthy_ = why;
    throw TargetError(fmt::format("{}: {}", describe(), why));
  }

  // The reply must describe exactly the outputs that were asked for: a worker cannot make the driver
  // read past the arena or build arrays of another shape.
  CallResult decode_call_result(const wire::Frame& reply, const CallRequest& request) {
    wire::Decoder d(reply.payload);
    wire::ResultHeader h = wire::decode_result(d);
    CallResult& r = h.result;
    if (r.outcome != CallOutcome::completed) return r;
    if (h.placements.size() != request.invocations.size())
      throw wire::ProtocolError(fmt::format("{} results for {} invocations", h.placements.size(), request.invocations.size()));
    std::uint64_t expected = 0, end = 0;
    for (const Invocation& inv : request.invocations)
      for (const TensorArg& a : inv.outputs) expected += static_cast<std::uint64_t>(numel(a.layout.shape)) * size_of(a.layout.dtype);
    for (std::size_t i = 0; i < h.placements.size(); ++i) {
      const auto& outs = request.invocations[i].outputs;
      if (h.placements[i].size() != outs.size())
        throw wire::ProtocolError(fmt::format("{} outputs where {} were asked for", h.placements[i].size(), outs.size()));
      for (std::size_t j = 0; j < outs.size(); ++j) {
        const wire::OutputPlacement& p = h.placements[i][j];
        const Layout& l = outs[j].layout;
        if (p.dtype != l.dtype || p.shape != l.shape ||
            p.bytes != static_cast<std::uint64_t>(numel(l.shape)) * size_of(l.dtype))
          throw wire::ProtocolError(fmt::format("output {} came back as {} {}, not {} {}", j, name_of(p.dtype),
                                                shape_string(p.shape), name_of(l.dtype), shape_string(l.shape)));
        if (p.offset > expected || p.bytes > expected - p.offset)
          throw wire::ProtocolError(fmt::format("output {} placed at {} past the {} bytes of all outputs", j, p.offset, expected));
        end = std::max(end, p.offset + p.bytes);
      }
    }
    const std::byte* base = end ? arena_->view(end) : nullptr;
    for (std::size_t i = 0; i < h.placements.size(); ++i) {
      for (const wire::OutputPlacement& p : h.placements[i]) {
        HostArray a(p.dtype, p.shape);
        if (p.bytes) std::memcpy(a.data(), base + p.offset, p.bytes);
        r.results[i].outputs.push_back(std::move(a));
      }
    }
    return r;
  }

  EntrySpec spec_;
  TargetOptions options_;
  std::string exe_;
  std::optional<SharedArena> arena_;
  std::unique_ptr<WorkerProcess> worker_;
  DLDeviceType device_ = kDLCPU;
  std::string unhealthy_;
  int starts_ = 0;  // workers started so far ("{start}" in a launch prefix)
};

}  // namespace

std::unique_ptr<Target> make_worker_target(const EntrySpec& spec, const TargetOptions& options) {
  return std::make_unique<WorkerTarget>(spec, options);
}

}  // namespace kgate
