#include "worker/worker_main.hpp"

#include "kgate/verify.hpp"
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string_view>
#include <string>

#include <fmt/format.h>

#include "worker/arena.hpp"
#include "worker/isolation.hpp"
#include "worker/protocol.hpp"
#include "worker/sandbox.hpp"

namespace kgate {
namespace {

constexpr int kChannelFd = 3;
constexpr int kArenaFd = 4;

// Before any candidate code runs: nothing inherited beyond the channels, no core files (a crashing
// candidate must not fill the disk), death with the driver, no privilege gain through exec. Under a tool
// (compute-sanitizer starts the worker and injects its agent before main) the descriptors above the
// channels may be the agent's own, so they stay open. (That alone did not make memcheck report the
// missing tail guard on the H200: see docs/gpu.md, "memcheck finding".)
void harden(bool close_inherited) {
  if (close_inherited && syscall(SYS_close_range, 5u, ~0u, 0u) != 0) {
    for (int fd = 5; fd < 1024; ++fd) close(fd);
  }
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

bool read_all(int fd, void* out, std::size_t n) {
  auto* p = static_cast<std::byte*>(out);
  while (n > 0) {
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k > 0) {
      p += k;
      n -= static_cast<std::size_t>(k);
    } else if (k < 0 && errno == EINTR) {
      continue;
    } else {
      return false;
    }
  }
  return true;
}

bool receive(wire::Frame& f) {
  std::byte header[wire::kHeaderBytes];
  if (!read_all(kChannelFd, header, sizeof header)) return false;
  std::uint32_t magic, op;
  std::uint64_t n;
  std::memcpy(&magic, header, 4);
  std::memcpy(&op, header + 4, 4);
  std::memcpy(&n, header + 8, 8);
  if (magic != wire::kMagic || n > wire::kMaxPayload) return false;
  f.op = static_cast<wire::Op>(op);
  f.payload.resize(n);
  return read_all(kChannelFd, f.payload.data(), n);
}

void reply(wire::Op op, const std::vector<std::byte>& payload) {
  std::vector<std::byte> bytes(wire::kHeaderBytes + payload.size());
  const std::uint32_t magic = wire::kMagic, code = static_cast<std::uint32_t>(op);
  const std::uint64_t n = payload.size();
  std::memcpy(bytes.data(), &magic, 4);
  std::memcpy(bytes.data() + 4, &code, 4);
  std::memcpy(bytes.data() + 8, &n, 8);
  if (n) std::memcpy(bytes.data() + wire::kHeaderBytes, payload.data(), n);
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t k = ::send(kChannelFd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (k > 0) sent += static_cast<std::size_t>(k);
    else if (k < 0 && errno == EINTR) continue;
    else std::_Exit(0);  // the driver is gone; nobody is left to serve
  }
}

struct Args {
  std::string mode;
  EntrySpec spec;
  TargetOptions options;
  bool sandbox = true;
  bool under_tool = false;
  bool isolate = true;
};

Args parse_args(int argc, char** argv) {
  Args a;
  if (argc < 2) throw LoadError("kgate-worker: expected serve or probe");
  a.mode = argv[1];
  if (a.mode != "serve" && a.mode != "probe") throw LoadError("kgate-worker: unknown mode " + a.mode);
  for (int i = 2; i < argc; i += 2) {
    const std::string key = argv[i];
    if (key == "--no-sandbox" || key == "--under-tool" || key == "--unsafe-no-isolation") {
      if (key != "--unsafe-no-isolation") a.sandbox = false;  // a tool's own files are written from inside
      if (key != "--no-sandbox") a.isolate = false;  // a tool finds its target by pid (see startup.hpp)
      a.under_tool = a.under_tool || key == "--under-tool";
      --i;
      continue;
    }
    if (i + 1 >= argc) throw LoadError("kgate-worker: " + key + " needs a value");
    const std::string value = argv[i + 1];
    if (key == "--library") a.spec.library = value;
    else if (key == "--symbol") a.spec.symbol = value;
    else if (key == "--guard-bytes") a.options.guard_bytes = std::stoull(value);
    else if (key == "--timeout") a.options.timeout_seconds = std::stod(value);
    else if (key == "--output-limit") a.options.output_limit = std::stoull(value);
    else if (key == "--memory-limit") a.options.memory_limit_bytes = std::stoull(value);
    else throw LoadError("kgate-worker: unknown option " + key);
  }
  if (a.spec.library.empty() || a.spec.symbol.empty()) throw LoadError("kgate-worker: --library and --symbol are required");
  return a;
}

class Server {
 public:
  Server(SharedArena arena, std::unique_ptr<DeviceBackend> backend, kgate_entry_fn entry, const BackendFactory& make,
         TargetOptions options)
      : arena_(std::move(arena)), backend_(std::move(backend)), make_(make), options_(options) {
    entry_ = [entry](const kgate_call& c) { return entry(&c); };
  }

  void serve() {
    wire::Frame f;
    while (receive(f)) {
      if (f.op == wire::Op::quit) return;
      try {
        wire::Decoder d(f.payload);
        reply(wire::Op::ok, handle(f.op, d));
      } catch (const std::exception& e) {
        reply(wire::Op::error, wire::Encoder().str(e.what()).take());
      }
    }
  }

 private:
  std::vector<std::byte> handle(wire::Op op, wire::Decoder& d) {
    wire::Encoder out;
    switch (op) {
      case wire::Op::alloc: {
        const std::uint64_t bytes = d.u64();
        d.finish();
        out.u32(backend_->alloc(bytes));
        break;
      }
      case wire::Op::release: {
        const BufferId id = d.u32();
        d.finish();
        backend_->release(id);
        break;
      }
      case wire::Op::write: {
        const BufferId id = d.u32();
        const std::uint64_t offset = d.u64(), bytes = d.u64();
        d.finish();
        backend_->write(id, offset, std::span<const std::byte>(arena_.view(bytes), bytes));
        break;
      }
      case wire::Op::read: {
        const BufferId id = d.u32();
        const std::uint64_t offset = d.u64(), bytes = d.u64();
        d.finish();
        const std::vector<std::byte> data = backend_->read(id, offset, bytes);
        if (!data.empty()) std::memcpy(arena_.reserve(data.size()), data.data(), data.size());
        break;
      }
      case wire::Op::check_guards: {
        const BufferId id = d.u32();
        d.finish();
        wire::encode_guards(out, backend_->check_guards(id));
        break;
      }
      case wire::Op::call: return call(wire::decode_request(d));
      case wire::Op::reset:
        d.finish();
        backend_.reset();  // free the old buffers before the new backend allocates any
        backend_ = make_(device_, options_);
        break;
      default: throw TargetError(fmt::format("unknown command {}", static_cast<std::uint32_t>(op)));
    }
    return out.take();
  }

  std::vector<std::byte> call(const CallRequest& request) {
    CallResult r = backend_->invoke(request, entry_);
    std::fflush(nullptr);  // what the candidate printed reaches the pipe before the reply does
    std::size_t total = 0;
    for (const InvocationResult& inv : r.results)
      for (const HostArray& a : inv.outputs) total += a.nbytes();
    std::byte* base = arena_.reserve(total);
    std::vector<std::vector<wire::OutputPlacement>> placements(r.results.size());
    std::size_t at = 0;
    for (std::size_t i = 0; i < r.results.size(); ++i) {
      for (const HostArray& a : r.results[i].outputs) {
        if (a.nbytes()) std::memcpy(base + at, a.data(), a.nbytes());
        placements[i].push_back({a.dtype(), a.shape(), at, a.nbytes()});
        at += a.nbytes();
      }
    }
    wire::Encoder out;
    wire::encode_result(out, r, placements);
    return out.take();
  }

  SharedArena arena_;
  std::unique_ptr<DeviceBackend> backend_;
  const BackendFactory& make_;
  TargetOptions options_;
  DLDeviceType device_ = kDLCPU;
  EntryFn entry_;

 public:
  void set_device(DLDeviceType d) { device_ = d; }
};

}  // namespace

int run_worker(int argc, char** argv, const BackendFactory& make_backend, const std::function<void()>& before_sandbox) {
  // The driver parses only what arrives on the channel; anything the worker says for itself goes
  // there too, never to stdout, which belongs to the candidate.
  auto refuse = [](const std::string& why) {
    reply(wire::Op::hello, wire::Encoder().u8(0).str(why).take());
    return 0;
  };
  Args args;
  try {
    args = parse_args(argc, argv);
  } catch (const std::exception& e) {
    harden(true);
    return refuse(e.what());
  }
  if (args.isolate) {
    // Before anything else runs: from here on this process is the candidate's side of isolation.hpp.
    IsolationOptions io;
    io.keep_fds = {kChannelFd, kArenaFd};
    io.memory = args.options.memory_limit_bytes;
    io.visible = {std::filesystem::path(args.spec.library).parent_path().string()};
    // The candidate library is opened after the uid is dropped: under a directory that uid may not search
    // (root's 0700 home) it is reached through isolation.hpp's covering mounts, never by keeping root.
    if (std::error_code ec; std::filesystem::is_regular_file(args.spec.library, ec))
      io.reach = {std::filesystem::absolute(args.spec.library).string()};
    io.on_failure = [](const std::string& why) { reply(wire::Op::hello, wire::Encoder().u8(0).str(why).take()); };
    try {
      enter_isolation(io);
    } catch (const IsolationError& e) {
      return refuse(fmt::format("cannot isolate the worker: {}", e.what()));
    }
  }
  harden(!args.under_tool);
  // Every call gathers its outputs into fresh arrays as large as the tensors (twice the CPU of the call
  // itself at 1M elements when each came from a fresh mmap).
  keep_large_allocations_in_heap();
  // The guard seed arrives on the channel, never in argv or the environment (both readable by the
  // candidate through /proc/self); the worker holds only this derived value, never the run's seed.
  {
    wire::Frame setup;
    if (!receive(setup) || setup.op != wire::Op::setup) return refuse("kgate-worker: expected the setup frame first");
    try {
      wire::Decoder d(setup.payload);
      args.options.guard_seed = d.u64();
      d.finish();
    } catch (const std::exception& e) {
      return refuse(fmt::format("kgate-worker: a malformed setup frame: {}", e.what()));
    }
  }
  if (args.options.memory_limit_bytes) {
    // RLIMIT_DATA rather than RLIMIT_AS: a CUDA context reserves terabytes of address space it never
    // backs, which only the latter would count.
    const rlimit data{args.options.memory_limit_bytes, args.options.memory_limit_bytes};
    setrlimit(RLIMIT_DATA, &data);
  }
  if (before_sandbox) before_sandbox();
  if (args.sandbox && !std::getenv("KGATE_NO_SANDBOX")) {
    // Writable: this worker's own directory, and /dev (null, shm, GPU device nodes); a site can add
    // more (a CUDA cache directory) through KGATE_WORKER_WRITABLE=dir:dir.
    std::vector<std::string> writable = {std::filesystem::current_path().string(), "/dev"};
    if (const char* extra = std::getenv("KGATE_WORKER_WRITABLE")) {
      for (std::string_view rest = extra; !rest.empty();) {
        const std::size_t colon = rest.find(':');
        if (colon != 0) writable.emplace_back(rest.substr(0, colon));
        rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
      }
    }
    restrict_writes(writable);  // where Landlock is missing the worker is still isolated, only less so
  }
  std::unique_ptr<DeviceBackend> backend;
  LoadedEntry loaded;
  try {
    loaded = load_entry(args.spec);
    backend = make_backend(loaded.device, args.options);
    if (!backend)
      return refuse(fmt::format("{}: takes {} tensors, which this kgate build cannot run (built without CUDA)",
                                args.spec.library, loaded.device == kDLCUDA ? "CUDA" : "device"));
  } catch (const std::exception& e) {
    return refuse(e.what());
  }
  std::fflush(nullptr);
  reply(wire::Op::hello, wire::Encoder().u8(1).i32(static_cast<std::int32_t>(loaded.device)).take());
  if (args.mode == "probe") return 0;
  try {
    Server server(SharedArena::adopt(kArenaFd), std::move(backend), loaded.entry, make_backend, args.options);
    server.set_device(loaded.device);
    server.serve();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kgate-worker: %s\n", e.what());
    return 3;
  }
  return 0;
}

}  // namespace kgate
