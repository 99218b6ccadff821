// glr/chunks.hpp: how a problem splits into sequences and chunks.
//
// Every implementation numbers chunks the same way, so per-chunk intermediates (the states entering each
// chunk, their gradients) have one layout everywhere and the CUDA kernels can be diffed against the CPU
// stages: sequences in order (batch rows, or the packed sequences of cu_seqlens), and inside a sequence its
// chunks from first to last. A chunk never spans two sequences; the last chunk of a sequence may be short;
// a zero-length sequence has no chunk.
#pragma once

#include <cstdint>
#include <vector>

#include "glr/params.hpp"

namespace glr {

struct Sequence {
  std::int64_t index = 0;        // n: the row of h0/ht
  std::int64_t batch = 0;        // b: the batch row its tokens sit in (0 when packed)
  std::int64_t begin = 0;        // first token, within batch row b
  std::int64_t length = 0;
  std::int64_t first_chunk = 0;  // index of its first chunk in the plan
  std::int64_t num_chunks = 0;
};

struct Chunk {
  std::int64_t index = 0;     // position in the plan: the row of the per-chunk intermediates
  std::int64_t sequence = 0;  // n
  std::int64_t batch = 0;     // b
  std::int64_t begin = 0;     // first token, within batch row b
  std::int64_t length = 0;    // 1..chunk
};

struct ChunkPlan {
  std::vector<Sequence> sequences;
  std::vector<Chunk> chunks;
  std::int64_t num_chunks() const { return static_cast<std::int64_t>(chunks.size()); }
};

// p must be valid (Params::validate).
ChunkPlan make_chunk_plan(const Params& p);

}  // namespace glr
