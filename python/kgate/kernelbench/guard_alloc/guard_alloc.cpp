// kgate's guard allocator: a CUDA allocator for torch.cuda.memory.CUDAPluggableAllocator that puts every
// allocation of the candidate's worker between two guard zones of seeded bytes, fills fresh memory with the
// current poison, and checks the guards of live memory and of memory freed since, whenever the worker asks
// (after every call). It is how the bounds gate sees writes past the end of memory the candidate allocated itself
// (outputs, scratch) and how the coverage gate sees output elements the candidate never wrote.
//
// Layout of one allocation: [front guard | payload (size bytes) | back guard]. The payload starts kAlign-
// aligned (as cudaMalloc's would); the back guard starts right at payload + size, so a write one element
// past the end lands in it. Guards are a pure function of (seed, allocation number, byte index).
//
// C entry points (ctypes and torch load this library by name):
//   void* kgate_guard_malloc(ssize_t size, int device, cudaStream_t stream)
//   void  kgate_guard_free(void* ptr, ssize_t size, int device, cudaStream_t stream)
//   void  kgate_guard_set_seed(uint64_t seed)
//   void  kgate_guard_set_poison(const char* bytes, size_t n)    // n == 0: fresh memory left as it is
//   void  kgate_guard_set_owner(int candidate)                     // 0: kgate's own buffers (not checked)
//   int   kgate_guard_check(char* out, size_t cap)                 // lines "REGION OFFSET EXPECTED FOUND"
#include <cuda_runtime.h>
#include <sys/types.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

constexpr std::size_t kGuard = 512;  // bytes on each side
constexpr std::size_t kAlign = 256;

struct Block {
  char* base = nullptr;       // what cudaMalloc returned
  std::size_t size = 0;       // payload bytes the caller asked for
  std::uint64_t number = 0;   // allocation number, for the pattern and the region text
  bool candidate = true;      // allocated on the candidate's behalf (checked) or kgate's own buffer
};

struct Violation {
  std::string region;
  std::int64_t offset;  // bytes from the payload's start: negative before it, >= size after it
  unsigned expected, found;
};

std::mutex mu;
std::unordered_map<void*, Block> live;
std::vector<Violation> pending;  // found at free, reported at the next check
std::uint64_t seed = 0x6B67617465ull, next_number = 1;
std::vector<unsigned char> poison;
bool owner_candidate = true;

std::uint64_t mix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The guard bytes of one allocation: front kGuard bytes then back kGuard bytes.
std::vector<unsigned char> pattern(std::uint64_t number) {
  std::vector<unsigned char> p(2 * kGuard);
  for (std::size_t i = 0; i < p.size(); i += 8) {
    const std::uint64_t w = mix64(seed ^ mix64(number * 0x100000001B3ull + i));
    std::memcpy(p.data() + i, &w, std::min<std::size_t>(8, p.size() - i));
  }
  return p;
}

std::string region_of(const Block& b) {
  return "candidate allocation #" + std::to_string(b.number) + " (" + std::to_string(b.size) + " bytes)";
}

// Compares a block's guards with its pattern; appends the violation nearest the payload on each side.
void check_block(const Block& b, std::vector<Violation>& out) {
  const std::vector<unsigned char> want = pattern(b.number);
  std::vector<unsigned char> front(kGuard), back(kGuard);
  char* payload = b.base + kGuard;
  if (cudaMemcpy(front.data(), payload - kGuard, kGuard, cudaMemcpyDeviceToHost) != cudaSuccess ||
      cudaMemcpy(back.data(), payload + b.size, kGuard, cudaMemcpyDeviceToHost) != cudaSuccess) {
    out.push_back({region_of(b) + " (guards unreadable)", 0, 0, 0});
    return;
  }
  for (std::size_t i = kGuard; i-- > 0;)
    if (front[i] != want[i]) {
      out.push_back({region_of(b), static_cast<std::int64_t>(i) - static_cast<std::int64_t>(kGuard), want[i], front[i]});
      break;
    }
  for (std::size_t i = 0; i < kGuard; ++i)
    if (back[i] != want[kGuard + i]) {
      out.push_back({region_of(b), static_cast<std::int64_t>(b.size + i), want[kGuard + i], back[i]});
      break;
    }
}

// Pinned host slots for the bytes a fresh allocation starts with (its guards and the poison's first copy).
// A copy from pageable memory would synchronize the stream it is issued on, and a page-locked allocation
// synchronizes the device: either would make the candidate's allocation wait for the work the caller had
// queued on its stream, which is the very race the stream gate stages (inputs written by a long kernel on
// the caller's stream just before the call) and would hide. Slots are taken at the first allocation and
// reused once the copy that read one has run (its event); more are made only when all are in flight.
constexpr std::size_t kSlotBytes = 2 * kGuard + 4096;
constexpr int kSlotsAtOnce = 512;  // 2 MiB pinned: a staged call seldom has more allocations in flight
struct Slot {
  unsigned char* host = nullptr;
  cudaEvent_t done = nullptr;
};
std::vector<Slot> slots;

Slot* free_slot() {
  for (Slot& s : slots)
    if (cudaEventQuery(s.done) == cudaSuccess) return &s;
  const std::size_t before = slots.size();
  for (int k = 0; k < kSlotsAtOnce; ++k) {
    Slot s;
    if (cudaHostAlloc(reinterpret_cast<void**>(&s.host), kSlotBytes, cudaHostAllocDefault) != cudaSuccess) break;
    if (cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming) != cudaSuccess) {
      cudaFreeHost(s.host);
      break;
    }
    slots.push_back(s);
  }
  return slots.size() > before ? &slots[before] : nullptr;
}

// Writes a fresh block's guards and fills its payload with the poison repeated (one copy from a pinned slot,
// then doubling device copies), all queued on `stream`, the stream the allocation is for: work the caller
// queues there after the allocation sees them written, and nothing waits here. false: no slot.
bool initialise(const Block& b, cudaStream_t stream) {
  Slot* s = free_slot();
  if (s == nullptr) return false;
  const std::vector<unsigned char> p = pattern(b.number);
  std::memcpy(s->host, p.data(), p.size());
  char* payload = b.base + kGuard;
  cudaMemcpyAsync(b.base, s->host, kGuard, cudaMemcpyHostToDevice, stream);
  cudaMemcpyAsync(payload + b.size, s->host + kGuard, kGuard, cudaMemcpyHostToDevice, stream);
  const std::size_t n = b.size;
  if (!poison.empty() && n > 0) {
    if (std::all_of(poison.begin(), poison.end(), [](unsigned char c) { return c == poison[0]; })) {
      cudaMemsetAsync(payload, poison[0], n, stream);
    } else {
      unsigned char* first_copy = s->host + 2 * kGuard;
      const std::size_t first = std::min<std::size_t>(n, 4096 / poison.size() * poison.size());
      for (std::size_t i = 0; i < first; ++i) first_copy[i] = poison[i % poison.size()];
      cudaMemcpyAsync(payload, first_copy, first, cudaMemcpyHostToDevice, stream);
      for (std::size_t done = first; done < n;) {
        const std::size_t k = std::min(done, n - done);
        cudaMemcpyAsync(payload + done, payload, k, cudaMemcpyDeviceToDevice, stream);
        done += k;
      }
    }
  }
  return cudaEventRecord(s->done, stream) == cudaSuccess;
}

// Freed blocks wait here until the next check (or until memory runs short, or until they pass the limit below):
// checking and releasing one at free time meant synchronizing the device, which also made the candidate wait
// for its caller's queued work.
std::vector<Block> freed;
std::size_t freed_bytes = 0;  // what `freed` holds on the device, guards included

// The most bytes freed blocks may hold before they are checked and released as when memory runs short (the
// device synchronized, then release_freed). Without it one call's freed memory waited for the call's end: a
// whole network's activations at once, and with other rows' workers on the card this worker took all that was
// free (120-136 GiB on an H200, rows beside it out of memory) before "memory runs short" released anything.
// KGATE_GUARD_FREED_LIMIT (bytes) in the process's environment sets it, 0 turns it off (the audit's workers get
// no KGATE_ variable, client.py: there it is always the default).
std::size_t freed_limit() {
  static const std::size_t limit = [] {
    const char* e = std::getenv("KGATE_GUARD_FREED_LIMIT");
    if (e != nullptr && *e != '\0') {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(e, &end, 10);
      if (end != nullptr && *end == '\0') return static_cast<std::size_t>(v);
    }
    return static_cast<std::size_t>(2) << 30;
  }();
  return limit;
}

std::size_t block_bytes(const Block& b) { return kGuard + ((b.size + kAlign - 1) / kAlign) * kAlign + kGuard; }

// Checks and releases every block in `freed`; the device has been synchronized by the caller.
void release_freed() {
  for (const Block& b : freed) {
    if (b.candidate) check_block(b, pending);
    cudaFree(b.base);
  }
  freed.clear();
  freed_bytes = 0;
}

}  // namespace

extern "C" {

// The guards and the poison are written on the allocation's stream, and nothing waits for them: work on that
// stream (how torch orders an allocation's use) sees them written. Written with plain cudaMemset/cudaMemcpy
// they went on the legacy default stream, which a candidate's non-blocking stream does not wait for, and on
// the H200 the poison landed over outputs that correct torch kernels had written on a side stream (the
// stream gate failed every correct control). Waiting for the stream instead (cudaStreamSynchronize, and a
// device synchronization at free) hid from the stream gate a kernel on the legacy stream that reads its
// inputs before the caller's stream has written them: a control of that kind passed in 1 of 10 H200 runs.
void* kgate_guard_malloc(ssize_t size, int device, cudaStream_t stream) {
  (void)device;
  std::lock_guard<std::mutex> lock(mu);
  const std::size_t n = static_cast<std::size_t>(size < 0 ? 0 : size);
  const std::size_t total = kGuard + ((n + kAlign - 1) / kAlign) * kAlign + kGuard;
  void* base = nullptr;
  if (cudaMalloc(&base, total) != cudaSuccess) {
    // Short of memory: release what was freed since the last check (the device synchronized first) and
    // try once more.
    cudaGetLastError();
    cudaDeviceSynchronize();
    release_freed();
    if (cudaMalloc(&base, total) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
  }
  Block b{static_cast<char*>(base), n, next_number++, owner_candidate};
  if (!initialise(b, stream)) {
    cudaFree(base);
    return nullptr;
  }
  char* payload = b.base + kGuard;
  live[payload] = b;
  return payload;
}

void kgate_guard_free(void* ptr, ssize_t size, int device, cudaStream_t stream) {
  (void)size, (void)device;
  std::lock_guard<std::mutex> lock(mu);
  auto it = live.find(ptr);
  if (it == live.end()) return;
  freed.push_back(it->second);  // checked and released at the next check, after every kernel has finished
  freed_bytes += block_bytes(it->second);
  live.erase(it);
  if (freed_limit() != 0 && freed_bytes > freed_limit()) {
    // As when memory runs short (kgate_guard_malloc): every kernel finished, then checked and released. Never
    // while the stream is being captured into a CUDA graph (a synchronization would end the capture).
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &capturing) != cudaSuccess) {
      cudaGetLastError();
    } else if (capturing == cudaStreamCaptureStatusNone) {
      cudaDeviceSynchronize();
      release_freed();
    }
  }
}

void kgate_guard_set_seed(std::uint64_t s) {
  std::lock_guard<std::mutex> lock(mu);
  seed = s;
}

void kgate_guard_set_poison(const char* bytes, std::size_t n) {
  std::lock_guard<std::mutex> lock(mu);
  poison.assign(reinterpret_cast<const unsigned char*>(bytes), reinterpret_cast<const unsigned char*>(bytes) + n);
}

void kgate_guard_set_owner(int candidate) {
  std::lock_guard<std::mutex> lock(mu);
  owner_candidate = candidate != 0;
}

int kgate_guard_check(char* out, std::size_t cap) {
  std::lock_guard<std::mutex> lock(mu);
  cudaDeviceSynchronize();
  release_freed();
  std::vector<Violation> found;
  found.swap(pending);
  for (const auto& [ptr, b] : live)
    if (b.candidate) check_block(b, found);
  std::string text;
  int lines = 0;
  for (const Violation& v : found) {
    const std::string line = v.region + " " + std::to_string(v.offset) + " " + std::to_string(v.expected) + " " +
                             std::to_string(v.found) + "\n";
    if (text.size() + line.size() + 1 > cap) break;
    text += line;
    ++lines;
  }
  if (cap > 0) {
    std::memcpy(out, text.c_str(), std::min(cap - 1, text.size()));
    out[std::min(cap - 1, text.size())] = '\0';
  }
  return lines;
}

}  // extern "C"
