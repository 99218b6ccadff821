// Host-side loops over large arrays on a few threads, bitwise reproducible: an array is cut into chunks of a
// fixed size (never a function of the thread count), each chunk's result is kept apart, and the caller merges
// them in chunk order. So a comparison, a conversion or a draw gives the same bits on 1 thread or 16.
#pragma once

#include <cstdint>
#include <functional>

namespace kgate {

// Elements per chunk: fixed, so results never depend on how many threads ran.
inline constexpr std::int64_t kParallelChunk = std::int64_t{1} << 18;

// Threads the engine's host loops may use: KGATE_HOST_THREADS if set (>= 1), else the CPUs this process may
// run on, at most 4. Not OMP_NUM_THREADS: an audit sets that to CPUs / row jobs (1 on the H200's 16 CPUs and
// 12 jobs) against OpenMP pools that spin in every job, while these threads live only inside one loop over a
// case of more than 2^18 elements (the long rows, mostly alone at the end of a call) and never spin.
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
