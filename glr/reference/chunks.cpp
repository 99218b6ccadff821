#include "glr/chunks.hpp"

#include <algorithm>

namespace glr {

ChunkPlan make_chunk_plan(const Params& p) {
  ChunkPlan plan;
  const std::int64_t N = p.num_seqs();
  plan.sequences.reserve(static_cast<std::size_t>(N));
  for (std::int64_t n = 0; n < N; ++n) {
    Sequence s;
    s.index = n;
    s.batch = p.varlen() ? 0 : n;
    s.begin = p.varlen() ? p.cu_seqlens[static_cast<std::size_t>(n)] : 0;
    s.length = p.varlen() ? p.cu_seqlens[static_cast<std::size_t>(n) + 1] - s.begin : p.T;
    s.first_chunk = plan.num_chunks();
    for (std::int64_t t = 0; t < s.length; t += p.chunk) {
      Chunk c;
      c.index = plan.num_chunks();
      c.sequence = n;
      c.batch = s.batch;
      c.begin = s.begin + t;
      c.length = std::min(p.chunk, s.length - t);
      plan.chunks.push_back(c);
    }
    s.num_chunks = plan.num_chunks() - s.first_chunk;
    plan.sequences.push_back(s);
  }
  return plan;
}

}  // namespace glr
