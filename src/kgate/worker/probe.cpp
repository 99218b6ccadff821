// probe_entry and the start-up handshake: the library is loaded in a throwaway worker, so whatever its
// constructors do happens in a process that is about to be discarded.
#include <cstdlib>
#include <filesystem>
#include <string_view>

#include <fmt/format.h>

#include "worker/arena.hpp"
#include "worker/startup.hpp"

namespace kgate {

std::vector<std::string> worker_args(const char* mode, const EntrySpec& spec, const TargetOptions& o) {
  std::vector<std::string> args = {mode,
          "--library", std::filesystem::absolute(spec.library).string(),
          "--symbol", spec.symbol,
          "--guard-bytes", std::to_string(o.guard_bytes),
          "--timeout", fmt::format("{}", o.timeout_seconds),
          "--output-limit", std::to_string(o.output_limit)};
  if (o.memory_limit_bytes) args.insert(args.end(), {"--memory-limit", std::to_string(o.memory_limit_bytes)});
  // A wrapper such as compute-sanitizer keeps its own state in files the worker's process writes, and
  // may talk to its agent inside the worker over inherited descriptors: no write sandbox, nothing closed.
  if (!o.launch_prefix.empty()) args.push_back("--under-tool");
  else if (!worker_isolated(o)) args.push_back("--unsafe-no-isolation");
  return args;
}

std::string explain_death(const std::string& death) {
  if (death.rfind("SIGSYS", 0) != 0) return death;
  return "attack on the judge: a forbidden system call (ptrace, another process's memory, or a signal or pidfd "
         "aimed outside its own process tree) ended the worker (" + death + ")";
}

bool worker_isolated(const TargetOptions& o) {
  const char* unsafe = std::getenv("KGATE_UNSAFE_NO_ISOLATION");
  return o.launch_prefix.empty() && !(unsafe && std::string_view(unsafe) == "1");
}

void send_setup(WorkerProcess& worker, const TargetOptions& o, double timeout_seconds) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_seconds));
  // A worker that is already gone says so through await_hello, which reads how it ended.
  worker.send({wire::Op::setup, wire::Encoder().u64(o.guard_seed).take()}, deadline);
}

DLDeviceType await_hello(WorkerProcess& worker, const EntrySpec& spec, double timeout_seconds) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_seconds));
  wire::Frame f;
  WorkerProcess::Event ev;
  try {
    ev = worker.receive(f, deadline);
  } catch (const wire::ProtocolError& e) {
    worker.kill_now();
    throw LoadCrash(fmt::format("{}: broke the worker protocol while loading: {}", spec.library, e.what()),
                    CallOutcome::crashed, worker.output().excerpt());
  }
  if (ev == WorkerProcess::Event::died)
    throw LoadCrash(fmt::format("{}: crashed while loading: {}", spec.library, explain_death(worker.death())),
                    CallOutcome::crashed,
                    worker.output().excerpt());
  if (ev == WorkerProcess::Event::timed_out)
    throw LoadCrash(fmt::format("{}: did not finish loading within {} s", spec.library, timeout_seconds),
                    CallOutcome::timed_out, worker.output().excerpt());
  try {
    if (f.op != wire::Op::hello) throw wire::ProtocolError("the first message was not a hello");
    wire::Decoder d(f.payload);
    if (d.u8() == 0) {
      std::string why = d.str();
      throw LoadError(why);
    }
    const std::int32_t device = d.i32();
    d.finish();
    if (device != kDLCPU && device != kDLCUDA) throw wire::ProtocolError(fmt::format("hello names device {}", device));
    return static_cast<DLDeviceType>(device);
  } catch (const wire::ProtocolError& e) {
    worker.kill_now();
    throw LoadCrash(fmt::format("{}: broke the worker protocol while loading: {}", spec.library, e.what()),
                    CallOutcome::crashed, worker.output().excerpt());
  }
}

DLDeviceType probe_entry(const EntrySpec& spec, double timeout_seconds) {
  std::string exe;
  try {
    exe = find_worker_executable();
  } catch (const TargetError& e) {
    throw LoadError(e.what());
  }
  SharedArena arena = SharedArena::create(0);
  TargetOptions options;
  WorkerProcess worker(exe, worker_args("probe", spec, options), arena.fd(), options.output_limit,
                       worker_isolated(options));
  send_setup(worker, options, timeout_seconds);
  const DLDeviceType device = await_hello(worker, spec, timeout_seconds);
  worker.terminate(std::chrono::milliseconds(500));
  return device;
}

}  // namespace kgate
