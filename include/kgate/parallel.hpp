// Host-side loops over large arrays on a few threads, bitwise reproducible: an array is cut into chunks of a
// fixed size (never a function of the thread count), each chunk's result is kept apart, and the caller merges
// them in chunk order. So a comparison, a conversion or a draw gives the same bits on 1 thread or 16.
#pragma once

#include <cstdint>
#include <functional>

namespace kgate {

// Elements per chunk: fixed, so results never depend on how many threads ran.
inline constexpr std::int64_t kParallelChunk = std::int64_t{1} << 18;

// Threads the engine's host loops may use: KGATE_HOST_THREADS if set (>= 1), else OMP_NUM_THREADS (row jobs
// of an audit share the machine through it), else the hardware's, at most 8.
int host_threads();
// Overrides host_threads() from now on (tests: the same results on 1 thread and on many); 0 restores it.
void set_host_threads(int n);

// How many chunks of kParallelChunk elements cover n elements (at least 1).
std::int64_t chunk_count(std::int64_t n);

// Calls fn(chunk, begin, end) once for every chunk of [0, n), on up to host_threads() threads (the calling
// thread among them); small n runs inline. fn must write only to its own chunk's results. The first
// exception any chunk throws is rethrown after every thread has stopped.
void parallel_chunks(std::int64_t n, const std::function<void(std::int64_t, std::int64_t, std::int64_t)>& fn);

}  // namespace kgate
