#include "kgate/parallel.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace kgate {
namespace {

int env_threads(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return 0;
  const long n = std::strtol(v, nullptr, 10);
  return n >= 1 ? static_cast<int>(std::min(n, 256L)) : 0;
}

std::atomic<int> override_threads{0};

}  // namespace

void set_host_threads(int n) { override_threads = n > 0 ? n : 0; }

int host_threads() {
  if (const int o = override_threads.load()) return o;
  static const int n = [] {
    if (int k = env_threads("KGATE_HOST_THREADS")) return k;
    cpu_set_t set;
    CPU_ZERO(&set);
    const int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                                 : static_cast<int>(std::thread::hardware_concurrency());
    return std::clamp(cpus, 1, 4);
  }();
  return n;
}

std::int64_t chunk_count(std::int64_t n) { return n <= 0 ? 1 : (n + kParallelChunk - 1) / kParallelChunk; }

void parallel_chunks(std::int64_t n, const std::function<void(std::int64_t, std::int64_t, std::int64_t)>& fn) {
  const std::int64_t chunks = chunk_count(n);
  const int threads = static_cast<int>(std::min<std::int64_t>(host_threads(), chunks));
  if (threads <= 1) {
    for (std::int64_t c = 0; c < chunks; ++c) fn(c, c * kParallelChunk, std::min(n, (c + 1) * kParallelChunk));
    return;
  }
  std::atomic<std::int64_t> next{0};
  std::atomic<bool> stop{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    for (;;) {
      if (stop.load(std::memory_order_relaxed)) return;
      const std::int64_t c = next.fetch_add(1);
      if (c >= chunks) return;
      try {
        fn(c, c * kParallelChunk, std::min(n, (c + 1) * kParallelChunk));
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        stop = true;
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads - 1));
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace kgate
