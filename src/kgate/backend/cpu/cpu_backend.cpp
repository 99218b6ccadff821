// The CPU backend: guarded host buffers, and calls on the calling thread (or one thread per invocation when
// several are in flight at once, which is the CPU form of the stream gate).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <atomic>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "backend/backend.hpp"
#include "backend/invocation.hpp"
#include "kgate/rng.hpp"

namespace kgate {
namespace {

constexpr std::size_t kAlign = 256;

struct HostBuffer {
  std::byte* base = nullptr;  // start of the front guard
  std::size_t guard = 0;
  std::size_t size = 0;       // payload bytes
  std::vector<std::byte> pattern;  // guard bytes, front then back
  std::byte* payload() const { return base + guard; }
};

class CpuBackend final : public DeviceBackend {
 public:
  explicit CpuBackend(const TargetOptions& o)
      : guard_((o.guard_bytes + kAlign - 1) / kAlign * kAlign), seed_(o.guard_seed) {}
  ~CpuBackend() override {
    for (auto& [id, b] : buffers_) std::free(b.base);
  }

  DLDeviceType device() const override { return kDLCPU; }

  BufferId alloc(std::size_t bytes) override {
    const BufferId id = next_id_++;
    HostBuffer b;
    b.guard = guard_;
    b.size = bytes;
    const std::size_t total = (2 * guard_ + bytes + kAlign - 1) / kAlign * kAlign;
    b.base = static_cast<std::byte*>(std::aligned_alloc(kAlign, total));
    if (!b.base) throw TargetError(fmt::format("cannot allocate {} bytes of host memory", bytes));
    b.pattern.resize(2 * guard_);
    // Eight pattern bytes per draw: a verify run allocates hundreds of buffers, and drawing one byte per
    // mix made the guards cost more than everything else a small case does.
    const Stream s = Stream(seed_).child(id);
    for (std::size_t i = 0; i < b.pattern.size(); i += 8) {
      const std::uint64_t w = s.bits(i / 8);
      std::memcpy(b.pattern.data() + i, &w, std::min<std::size_t>(8, b.pattern.size() - i));
    }
    std::memcpy(b.base, b.pattern.data(), guard_);
    std::memcpy(b.payload() + bytes, b.pattern.data() + guard_, guard_);
    buffers_.emplace(id, std::move(b));
    return id;
  }

  void release(BufferId id) override {
    auto it = buffers_.find(id);
    if (it == buffers_.end()) throw TargetError(fmt::format("release: no buffer {}", id));
    std::free(it->second.base);
    buffers_.erase(it);
  }

  void write(BufferId id, std::size_t offset, std::span<const std::byte> data) override {
    HostBuffer& b = get(id, "write");
    if (offset + data.size() > b.size)
      throw TargetError(fmt::format("write of {} bytes at {} past the end of buffer {} ({} bytes)", data.size(),
                                    offset, id, b.size));
    std::memcpy(b.payload() + offset, data.data(), data.size());
  }

  std::vector<std::byte> read(BufferId id, std::size_t offset, std::size_t bytes) override {
    HostBuffer& b = get(id, "read");
    if (offset + bytes > b.size)
      throw TargetError(fmt::format("read of {} bytes at {} past the end of buffer {} ({} bytes)", bytes, offset,
                                    id, b.size));
    return std::vector<std::byte>(b.payload() + offset, b.payload() + offset + bytes);
  }

  std::vector<GuardViolation> check_guards(BufferId id) override {
    HostBuffer& b = get(id, "check_guards");
    std::vector<GuardViolation> out;
    // Intact guards (the common case) cost two memcmp calls.
    const std::byte* back = b.payload() + b.size;
    if (std::memcmp(b.base, b.pattern.data(), b.guard) == 0 &&
        std::memcmp(back, b.pattern.data() + b.guard, b.guard) == 0)
      return out;
    // Report the violation nearest the payload on each side: that is where an overrun starts.
    for (std::size_t i = b.guard; i-- > 0;) {
      if (b.base[i] != b.pattern[i]) {
        out.push_back({id, static_cast<std::int64_t>(i) - static_cast<std::int64_t>(b.guard),
                       static_cast<std::uint8_t>(b.pattern[i]), static_cast<std::uint8_t>(b.base[i])});
        break;
      }
    }
    for (std::size_t i = 0; i < b.guard; ++i) {
      if (back[i] != b.pattern[b.guard + i]) {
        out.push_back({id, static_cast<std::int64_t>(b.size + i), static_cast<std::uint8_t>(b.pattern[b.guard + i]),
                       static_cast<std::uint8_t>(back[i])});
        break;
      }
    }
    return out;
  }

  CallResult invoke(const CallRequest& request, const EntryFn& entry) override {
    std::vector<PreparedInvocation> prepared;
    prepared.reserve(request.invocations.size());
    for (const Invocation& inv : request.invocations) {
      prepared.emplace_back(inv, kDLCPU, [&](BufferId id, const Layout& l, const char* what) {
        HostBuffer& b = get(id, what);
        check_fits(l, b.size, id, what);
        return static_cast<void*>(b.payload());
      });
    }
    for (PreparedInvocation& p : prepared) p.poison_outputs(request.poison);

    CallResult result;
    result.results.resize(prepared.size());
    const auto t0 = std::chrono::steady_clock::now();
    auto since_start = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    auto run_one = [&](std::size_t i) {
      result.results[i].started = since_start();
      try {
        result.results[i].status = entry(prepared[i].call());
      } catch (const std::exception& e) {
        result.results[i].status = KGATE_ERROR;
        prepared[i].set_message(std::string("the entry point threw: ") + e.what());
      } catch (...) {
        result.results[i].status = KGATE_ERROR;
        prepared[i].set_message("the entry point threw a non-standard exception");
      }
      result.results[i].finished = since_start();
    };
    if (prepared.size() == 1) {
      run_one(0);
    } else {
      // A spinning start line, not a sleeping one: a woken thread lags by tens of microseconds, longer than
      // a small kernel runs, and calls that never overlap cannot race.
      std::atomic<std::size_t> arrived{0};
      const std::size_t n = prepared.size();
      std::vector<std::thread> threads;
      for (std::size_t i = 0; i < n; ++i) {
        threads.emplace_back([&, i] {
          arrived.fetch_add(1, std::memory_order_acq_rel);
          for (int spins = 0; arrived.load(std::memory_order_acquire) < n; ++spins)
            if (spins > (1 << 16)) std::this_thread::yield();  // a loaded machine: let the other thread in
          run_one(i);
        });
      }
      for (auto& t : threads) t.join();
    }
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    std::set<BufferId> touched;
    for (std::size_t i = 0; i < prepared.size(); ++i) {
      result.results[i].message = prepared[i].message();
      const Invocation& inv = request.invocations[i];
      for (const TensorArg& a : inv.outputs) {
        HostBuffer& b = get(a.buffer, "gather");
        result.results[i].outputs.push_back(
            HostArray::gather(std::span<const std::byte>(b.payload(), b.size), a.layout));
      }
      for (const TensorArg& a : inv.inputs) touched.insert(a.buffer);
      for (const TensorArg& a : inv.outputs) touched.insert(a.buffer);
    }
    for (BufferId id : touched)
      for (const GuardViolation& v : check_guards(id)) result.guards.push_back(v);
    return result;
  }

 private:
  HostBuffer& get(BufferId id, const char* what) {
    auto it = buffers_.find(id);
    if (it == buffers_.end()) throw TargetError(fmt::format("{}: no buffer {}", what, id));
    return it->second;
  }

  std::size_t guard_;
  std::uint64_t seed_;
  BufferId next_id_ = 1;
  std::map<BufferId, HostBuffer> buffers_;
};

}  // namespace

std::unique_ptr<DeviceBackend> make_cpu_backend(const TargetOptions& options) {
  return std::make_unique<CpuBackend>(options);
}

}  // namespace kgate
