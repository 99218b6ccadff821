// The CUDA backend (see cuda_backend.hpp for what it promises). Host logic only; its kernels are in
// device_ops.cu. Every CUDA call is checked: outside a call a failure throws TargetError naming the step and
// the error; inside a call it ends the call as crashed.
#include <unistd.h>
#include "backend/cuda/cuda_backend.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <set>
#include <utility>

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "backend/cuda/device_ops.hpp"
#include "backend/invocation.hpp"
#include "kgate/rng.hpp"

namespace kgate {
namespace {

constexpr std::size_t kAlign = 256;
constexpr std::size_t kStagingBytes = std::size_t{32} << 20;  // pinned staging, the unit of every host copy

std::size_t round_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

std::string error_text(cudaError_t e) { return fmt::format("{}: {}", cudaGetErrorName(e), cudaGetErrorString(e)); }

// Ends a call as crashed; thrown only inside invoke and caught there.
struct CallFailure {
  std::string detail;
};

void fail_call(cudaError_t e, const std::string& step) {
  if (e != cudaSuccess) throw CallFailure{fmt::format("{} ({})", error_text(e), step)};
}

struct DeviceBuffer {
  std::byte* base = nullptr;  // start of the front guard
  std::size_t guard = 0;
  std::size_t size = 0;  // payload bytes
  std::uint64_t key = 0;  // guard pattern stream
  std::byte* payload() const { return base + guard; }
  std::byte* back() const { return base + guard + size; }
};

// A grow-only device allocation carved into 256-byte aligned pieces per call. Grows only between calls, so
// the implicit synchronisation of cudaFree never falls inside one.
class DeviceArena {
 public:
  ~DeviceArena() {
    if (base_) cudaFree(base_);
  }
  // Returns the error of the allocation; capacity unchanged on failure.
  cudaError_t reserve(std::size_t bytes) {
    if (bytes <= capacity_) return cudaSuccess;
    if (base_) cudaFree(base_);
    base_ = nullptr;
    capacity_ = 0;
    void* p = nullptr;
    if (cudaError_t e = cudaMalloc(&p, bytes); e != cudaSuccess) return e;
    base_ = static_cast<std::byte*>(p);
    capacity_ = bytes;
    return cudaSuccess;
  }
  std::byte* at(std::size_t offset) const { return base_ + offset; }

 private:
  std::byte* base_ = nullptr;
  std::size_t capacity_ = 0;
};

class CudaBackend final : public DeviceBackend {
 public:
  explicit CudaBackend(const TargetOptions& o) : guard_(round_up(o.guard_bytes, kAlign)), seed_(o.guard_seed) {
    setup("cudaSetDevice(0)", cudaSetDevice(0));
    setup("cudaFree(0) (creating the context)", cudaFree(nullptr));
    setup("cudaStreamCreateWithFlags (copy stream)", cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
    void* p = nullptr;
    setup("cudaHostAlloc (staging)", cudaHostAlloc(&p, kStagingBytes, cudaHostAllocDefault));
    staging_ = static_cast<std::byte*>(p);
    setup("cudaHostAlloc (release flag)", cudaHostAlloc(&p, kAlign, cudaHostAllocMapped));
    flag_host_ = static_cast<unsigned int*>(p);
    *flag_host_ = 0;
    setup("cudaHostGetDevicePointer (release flag)", cudaHostGetDevicePointer(&p, flag_host_, 0));
    flag_device_ = static_cast<const unsigned int*>(p);
    // [start_ns | go | timed_out] shared by the staged kernels of one call, then the guard scan results.
    setup("cudaMalloc (call words)", cudaMalloc(&p, kAlign + sizeof(cuda_ops::GuardScan) * cuda_ops::kMaxGuardSpans));
    words_ = static_cast<std::byte*>(p);
  }

  ~CudaBackend() override {
    // Best effort: a poisoned context refuses these, and the process is about to go anyway.
    cudaDeviceSynchronize();
    for (auto& [id, b] : buffers_) cudaFree(b.base);
    for (cudaStream_t s : streams_) cudaStreamDestroy(s);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    if (words_) cudaFree(words_);
    if (flag_host_) cudaFreeHost(flag_host_);
    if (staging_) cudaFreeHost(staging_);
    if (copy_) cudaStreamDestroy(copy_);
  }

  DLDeviceType device() const override { return kDLCUDA; }

  BufferId alloc(std::size_t bytes) override {
    usable("alloc");
    DeviceBuffer b;
    b.guard = guard_;
    b.size = bytes;
    void* p = nullptr;
    check(cudaMalloc(&p, 2 * guard_ + std::max<std::size_t>(bytes, 1)),
          fmt::format("cudaMalloc of {} bytes (payload {} + guards)", 2 * guard_ + bytes, bytes));
    b.base = static_cast<std::byte*>(p);
    const BufferId id = next_id_++;
    b.key = Stream(seed_).child(id).key();
    buffers_.emplace(id, b);
    check(cuda_ops::fill_guards(b.base, b.back(), guard_, b.key, copy_), "filling guard zones");
    check(cudaStreamSynchronize(copy_), "filling guard zones");
    return id;
  }

  void release(BufferId id) override {
    usable("release");
    auto it = buffers_.find(id);
    if (it == buffers_.end()) throw TargetError(fmt::format("release: no buffer {}", id));
    const cudaError_t e = cudaFree(it->second.base);
    buffers_.erase(it);
    check(e, fmt::format("cudaFree of buffer {}", id));
  }

  void write(BufferId id, std::size_t offset, std::span<const std::byte> data) override {
    usable("write");
    DeviceBuffer& b = get(id, "write");
    if (offset > b.size || data.size() > b.size - offset)
      throw TargetError(fmt::format("write of {} bytes at {} past the end of buffer {} ({} bytes)", data.size(),
                                    offset, id, b.size));
    to_device(b.payload() + offset, data.data(), data.size(), fmt::format("write to buffer {}", id));
  }

  std::vector<std::byte> read(BufferId id, std::size_t offset, std::size_t bytes) override {
    usable("read");
    DeviceBuffer& b = get(id, "read");
    if (offset > b.size || bytes > b.size - offset)
      throw TargetError(fmt::format("read of {} bytes at {} past the end of buffer {} ({} bytes)", bytes, offset,
                                    id, b.size));
    std::vector<std::byte> out(bytes);
    to_host(out.data(), b.payload() + offset, bytes, fmt::format("read from buffer {}", id));
    return out;
  }

  std::vector<GuardViolation> check_guards(BufferId id) override {
    usable("check_guards");
    get(id, "check_guards");
    return scan({id});
  }

  CallResult invoke(const CallRequest& request, const EntryFn& entry) override {
    usable("call");
    Plan plan = make_plan(request);  // throws TargetError for an invalid request, before any device work
    CallResult result;
    bool released = false;
    auto release_staged = [&] {
      if (!released) std::atomic_ref<unsigned int>(*flag_host_).store(1, std::memory_order_release);
      released = true;
    };
    try {
      prepare(request, plan);
      result = run(request, plan, entry, release_staged);
    } catch (const CallFailure& f) {
      release_staged();  // staged kernels still waiting must not hold the device until their timeout
      result = CallResult{};
      result.outcome = CallOutcome::crashed;
      result.detail = f.detail;
      // A sticky error (illegal address, trap, ...) leaves the context unusable; a launch error does not.
      cudaGetLastError();
      if (cudaError_t again = cudaDeviceSynchronize(); again != cudaSuccess) {
        poisoned_ = f.detail;
        cudaGetLastError();
      }
    }
    return result;
  }

 private:
  // Where each invocation's outputs are captured, and (staged) where its inputs hide until released.
  struct Plan {
    std::vector<PreparedInvocation> prepared;
    std::vector<std::vector<std::size_t>> capture_offset;  // [invocation][output] in capture_
    std::vector<std::vector<std::size_t>> capture_bytes;
    std::vector<std::vector<std::pair<BufferId, std::size_t>>> hidden;  // [invocation] (input buffer, offset)
    std::size_t capture_total = 0, hidden_total = 0;
  };

  Plan make_plan(const CallRequest& request) {
    Plan p;
    const std::size_t n = request.invocations.size();
    p.prepared.reserve(n);
    for (const Invocation& inv : request.invocations) {
      p.prepared.emplace_back(inv, kDLCUDA, [&](BufferId id, const Layout& l, const char* what) {
        DeviceBuffer& b = get(id, what);
        check_fits(l, b.size, id, what);
        if (static_cast<int>(l.shape.size()) > cuda_ops::kMaxRank)
          throw TargetError(fmt::format("{}: rank {} is above the CUDA backend's limit of {}", what, l.shape.size(),
                                        cuda_ops::kMaxRank));
        return static_cast<void*>(b.payload());
      });
    }
    p.capture_offset.resize(n);
    p.capture_bytes.resize(n);
    p.hidden.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      const Invocation& inv = request.invocations[i];
      for (const TensorArg& a : inv.outputs) {
        const std::size_t bytes = static_cast<std::size_t>(a.layout.storage_elements()) * size_of(a.layout.dtype);
        p.capture_offset[i].push_back(p.capture_total);
        p.capture_bytes[i].push_back(bytes);
        p.capture_total += round_up(bytes, kAlign);
      }
      if (request.stream != StreamMode::staged_inputs) continue;
      std::set<BufferId> seen;
      for (const TensorArg& a : inv.inputs) {
        if (!seen.insert(a.buffer).second) continue;
        p.hidden[i].emplace_back(a.buffer, p.hidden_total);
        p.hidden_total += round_up(buffers_.at(a.buffer).size, kAlign);
      }
    }
    return p;
  }

  // Everything before the first entry call, on the copy stream, finished before it returns.
  void prepare(const CallRequest& request, Plan& plan) {
    const std::size_t n = request.invocations.size();
    while (streams_.size() < n) {
      cudaStream_t s = nullptr;
      fail_call(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "creating a call stream");
      streams_.push_back(s);
    }
    while (events_.size() < n) {
      cudaEvent_t e = nullptr;
      fail_call(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "creating a completion event");
      events_.push_back(e);
    }
    fail_call(capture_.reserve(plan.capture_total), fmt::format("allocating {} bytes to capture outputs", plan.capture_total));
    fail_call(hidden_.reserve(plan.hidden_total), fmt::format("allocating {} bytes of staged inputs", plan.hidden_total));

    if (!request.poison.empty()) {
      for (std::size_t i = 0; i < n; ++i) {
        const Invocation& inv = request.invocations[i];
        for (std::size_t k = 0; k < inv.outputs.size(); ++k)
          fail_call(cuda_ops::poison_fill(poison_of(inv.outputs[k].layout, plan.prepared[i].output_base(k), request.poison),
                                          copy_),
                    "poisoning outputs");
      }
    }
    if (request.stream == StreamMode::staged_inputs) {
      for (std::size_t i = 0; i < n; ++i) {
        for (const auto& [id, offset] : plan.hidden[i]) {
          const DeviceBuffer& b = buffers_.at(id);
          fail_call(cudaMemcpyAsync(hidden_.at(offset), b.payload(), b.size, cudaMemcpyDeviceToDevice, copy_),
                    "hiding staged inputs");
          fail_call(cudaMemsetAsync(b.payload(), 0xff, b.size, copy_), "filling staged inputs with garbage");
        }
      }
      fail_call(cudaMemsetAsync(words_, 0, kAlign, copy_), "clearing the staged-release words");
      std::atomic_ref<unsigned int>(*flag_host_).store(0, std::memory_order_release);
    }
    fail_call(cudaStreamSynchronize(copy_), "preparing the call");
  }

  template <typename Release>
  CallResult run(const CallRequest& request, Plan& plan, const EntryFn& entry, Release& release_staged) {
    const std::size_t n = request.invocations.size();
    const bool staged = request.stream == StreamMode::staged_inputs;
    CallResult result;
    result.results.resize(n);
    fail_call(cudaGetLastError(), "an error pending before the call");
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < n; ++i) {
      cudaStream_t s = request.stream == StreamMode::null_stream ? nullptr : streams_[i];
      if (staged) launch_staged(plan.hidden[i], s);
      result.results[i].status = call_entry(entry, plan.prepared[i], s);
      fail_call(cudaGetLastError(), fmt::format("raised during invocation {}'s call", i));
      // The capture waits for the caller's stream and nothing else.
      fail_call(cudaEventRecord(events_[i], s), fmt::format("recording invocation {}'s completion", i));
      fail_call(cudaStreamWaitEvent(copy_, events_[i], 0), "ordering the output capture");
      const Invocation& inv = request.invocations[i];
      for (std::size_t k = 0; k < inv.outputs.size(); ++k) {
        if (plan.capture_bytes[i][k] == 0) continue;
        fail_call(cudaMemcpyAsync(capture_.at(plan.capture_offset[i][k]), plan.prepared[i].output_base(k),
                                  plan.capture_bytes[i][k], cudaMemcpyDeviceToDevice, copy_),
                  "capturing outputs");
      }
    }
    release_staged();
    for (std::size_t i = 0; i < n; ++i)
      fail_call(cudaEventSynchronize(events_[i]), fmt::format("raised by invocation {}'s work on its stream", i));
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fail_call(cudaStreamSynchronize(copy_), "capturing outputs");
    // Only now wait for whatever else the callee started, so its errors surface in this call.
    fail_call(cudaDeviceSynchronize(), "raised by the callee's work after its stream completed");

    if (staged) {
      unsigned int timed_out = 0;
      to_host_in_call(&timed_out, words_ + 2 * sizeof(unsigned long long), sizeof(timed_out));
      if (timed_out)
        result.detail = fmt::format(
            "staged inputs were released after the {:.0f} ms limit, not by the host: the callee seems to "
            "synchronise inside its call, so the inputs may have arrived before its work was queued",
            kStagedMaxSeconds * 1e3);
    }
    std::vector<std::byte> host;
    std::set<BufferId> touched;
    for (std::size_t i = 0; i < n; ++i) {
      const Invocation& inv = request.invocations[i];
      result.results[i].message = plan.prepared[i].message();
      for (std::size_t k = 0; k < inv.outputs.size(); ++k) {
        host.resize(plan.capture_bytes[i][k]);
        to_host_in_call(host.data(), capture_.at(plan.capture_offset[i][k]), host.size());
        result.results[i].outputs.push_back(HostArray::gather(host, inv.outputs[k].layout));
      }
      for (const TensorArg& a : inv.inputs) touched.insert(a.buffer);
      for (const TensorArg& a : inv.outputs) touched.insert(a.buffer);
    }
    try {
      result.guards = scan(std::vector<BufferId>(touched.begin(), touched.end()));
    } catch (const TargetError& e) {
      throw CallFailure{e.what()};
    }
    return result;
  }

  static std::int32_t call_entry(const EntryFn& entry, PreparedInvocation& p, cudaStream_t s) {
    try {
      return entry(p.call(s));
    } catch (const std::exception& e) {
      p.set_message(std::string("the entry point threw: ") + e.what());
    } catch (...) {
      p.set_message("the entry point threw a non-standard exception");
    }
    return KGATE_ERROR;
  }

  void launch_staged(const std::vector<std::pair<BufferId, std::size_t>>& hidden, cudaStream_t s) {
    cuda_ops::StagedRelease r;
    r.host_flag = flag_device_;
    r.start_ns = reinterpret_cast<unsigned long long*>(words_);
    r.go = reinterpret_cast<unsigned int*>(words_ + sizeof(unsigned long long));
    r.timed_out = reinterpret_cast<unsigned int*>(words_ + 2 * sizeof(unsigned long long));
    r.min_ns = static_cast<unsigned long long>(kStagedMinSeconds * 1e9);
    r.max_ns = static_cast<unsigned long long>(kStagedMaxSeconds * 1e9);
    std::size_t next = 0;
    do {  // at least one launch: an invocation without inputs still waits for the release
      cuda_ops::StagedCopies c;
      for (; next < hidden.size() && c.count < cuda_ops::kMaxStagedCopies; ++next, ++c.count) {
        const DeviceBuffer& b = buffers_.at(hidden[next].first);
        c.src[c.count] = hidden_.at(hidden[next].second);
        c.dst[c.count] = b.payload();
        c.bytes[c.count] = b.size;
      }
      fail_call(cuda_ops::staged_copy(c, r, s), "launching the staged-inputs kernel");
      r.wait = false;
    } while (next < hidden.size());
  }

  static cuda_ops::PoisonFill poison_of(const Layout& l, void* base, const std::vector<std::byte>& poison) {
    cuda_ops::PoisonFill f;
    f.element_size = static_cast<int>(size_of(l.dtype));
    f.first = static_cast<std::byte*>(base) + l.offset * f.element_size;
    f.numel = numel(l.shape);
    if (l.contiguous()) {
      f.rank = 1;
      f.shape[0] = f.numel;
      f.strides[0] = 1;
    } else {
      f.rank = static_cast<int>(l.shape.size());
      for (int d = 0; d < f.rank; ++d) f.shape[d] = l.shape[d], f.strides[d] = l.strides[d];
    }
    f.pattern_length = static_cast<int>(std::min<std::size_t>(poison.size(), sizeof(f.pattern)));
    std::memcpy(f.pattern, poison.data(), f.pattern_length);
    return f;
  }

  // The nearest violation on each side of each buffer, found on the device in batches.
  std::vector<GuardViolation> scan(const std::vector<BufferId>& ids) {
    std::vector<GuardViolation> out;
    if (guard_ == 0) return out;
    auto* results = reinterpret_cast<cuda_ops::GuardScan*>(words_ + kAlign);
    for (std::size_t first = 0; first < ids.size(); first += cuda_ops::kMaxGuardSpans) {
      cuda_ops::GuardSpans spans;
      for (std::size_t i = first; i < ids.size() && spans.count < cuda_ops::kMaxGuardSpans; ++i) {
        const DeviceBuffer& b = buffers_.at(ids[i]);
        spans.span[spans.count++] = {b.base, b.back(), b.key};
      }
      const std::size_t bytes = sizeof(cuda_ops::GuardScan) * spans.count;
      check(cudaMemsetAsync(results, 0xff, bytes, copy_), "clearing guard scan results");
      check(cuda_ops::scan_guards(spans, guard_, results, copy_), "scanning guard zones");
      check(cudaMemcpyAsync(staging_, results, bytes, cudaMemcpyDeviceToHost, copy_), "reading guard scan results");
      check(cudaStreamSynchronize(copy_), "scanning guard zones");
      std::vector<cuda_ops::GuardScan> found(spans.count);
      std::memcpy(found.data(), staging_, bytes);
      for (int k = 0; k < spans.count; ++k) {
        const BufferId id = ids[first + k];
        const Stream pattern(spans.span[k].key);
        if (found[k].front_distance != ~0ull) {
          const std::size_t i = guard_ - 1 - found[k].front_distance;  // index into the guard bytes
          out.push_back({id, -static_cast<std::int64_t>(found[k].front_distance) - 1,
                         static_cast<std::uint8_t>(pattern.bits(i) & 0xff),
                         static_cast<std::uint8_t>(found[k].front_found)});
        }
        if (found[k].back_offset != ~0ull) {
          const std::size_t i = guard_ + found[k].back_offset;
          out.push_back({id, static_cast<std::int64_t>(buffers_.at(id).size + found[k].back_offset),
                         static_cast<std::uint8_t>(pattern.bits(i) & 0xff),
                         static_cast<std::uint8_t>(found[k].back_found)});
        }
      }
    }
    return out;
  }

  void to_device(std::byte* dst, const std::byte* src, std::size_t n, const std::string& what) {
    for (std::size_t done = 0; done < n;) {
      const std::size_t chunk = std::min(kStagingBytes, n - done);
      std::memcpy(staging_, src + done, chunk);
      check(cudaMemcpyAsync(dst + done, staging_, chunk, cudaMemcpyHostToDevice, copy_), what);
      check(cudaStreamSynchronize(copy_), what);
      done += chunk;
    }
  }

  void to_host(void* dst, const std::byte* src, std::size_t n, const std::string& what) {
    for (std::size_t done = 0; done < n;) {
      const std::size_t chunk = std::min(kStagingBytes, n - done);
      check(cudaMemcpyAsync(staging_, src + done, chunk, cudaMemcpyDeviceToHost, copy_), what);
      check(cudaStreamSynchronize(copy_), what);
      std::memcpy(static_cast<std::byte*>(dst) + done, staging_, chunk);
      done += chunk;
    }
  }

  void to_host_in_call(void* dst, const std::byte* src, std::size_t n) {
    try {
      to_host(dst, src, n, "reading captured outputs");
    } catch (const TargetError& e) {
      throw CallFailure{e.what()};
    }
  }

  // Outside a call: a CUDA failure is the backend's to report. A sticky one also poisons the backend.
  void check(cudaError_t e, const std::string& what) {
    if (e == cudaSuccess) return;
    std::string text = fmt::format("CUDA backend: {} failed: {}", what, error_text(e));
    cudaGetLastError();
    if (cudaDeviceSynchronize() != cudaSuccess) poisoned_ = text;
    throw TargetError(text);
  }
  static void setup(const char* what, cudaError_t e) {
    if (e != cudaSuccess) throw TargetError(fmt::format("CUDA backend: {} failed: {}", what, error_text(e)));
  }
  void usable(const char* what) const {
    if (!poisoned_.empty())
      throw TargetError(fmt::format("CUDA backend: cannot {}: the CUDA context was lost to an earlier error ({}); "
                                    "the worker must be replaced",
                                    what, poisoned_));
  }
  DeviceBuffer& get(BufferId id, const char* what) {
    auto it = buffers_.find(id);
    if (it == buffers_.end()) throw TargetError(fmt::format("{}: no buffer {}", what, id));
    return it->second;
  }

  std::size_t guard_;
  std::uint64_t seed_;
  BufferId next_id_ = 1;
  std::map<BufferId, DeviceBuffer> buffers_;
  cudaStream_t copy_ = nullptr;
  std::vector<cudaStream_t> streams_;  // one per invocation in flight, reused across calls
  std::vector<cudaEvent_t> events_;
  std::byte* staging_ = nullptr;       // pinned, kStagingBytes
  unsigned int* flag_host_ = nullptr;  // mapped pinned: the host's release of the staged kernels
  const unsigned int* flag_device_ = nullptr;
  std::byte* words_ = nullptr;         // device: staged-release words, then guard scan results
  DeviceArena capture_, hidden_;
  std::string poisoned_;               // non-empty once a sticky error has destroyed the context
};

// Before CUDA starts in this process (cuInit reads it): with lazy loading a candidate's first launch may wait
// for the staged-inputs kernel, which waits for the host, which waits in that launch.
void prefer_eager_loading() { setenv("CUDA_MODULE_LOADING", "EAGER", /*overwrite=*/0); }

}  // namespace

bool cuda_device_available(std::string* why) {
  prefer_eager_loading();
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    if (why) *why = fmt::format("cudaGetDeviceCount failed: {}", error_text(e));
    cudaGetLastError();
    return false;
  }
  if (count == 0) {
    if (why) *why = "cudaGetDeviceCount found no CUDA device";
    return false;
  }
  return true;
}

std::unique_ptr<DeviceBackend> make_cuda_backend(const TargetOptions& options) {
  prefer_eager_loading();
  std::string why;
  if (!cuda_device_available(&why)) throw TargetError("CUDA backend: " + why);
  return std::make_unique<CudaBackend>(options);
}

void initialise_cuda_if_present() {
  if (::access("/dev/nvidiactl", F_OK) != 0) return;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // leave no error behind for the backend's own check to trip on
    return;
  }
  if (cudaSetDevice(0) == cudaSuccess) cudaFree(nullptr);  // creates the primary context
  cudaGetLastError();
}

}  // namespace kgate
