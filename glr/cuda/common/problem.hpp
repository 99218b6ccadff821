// glr/cuda/common/problem.hpp: the problem as the stages see it (plain data, passed by value to every
// kernel), the workspace, and where a chunk or a sequence lies.
//
// Built on the host from glr::Params by setup.cpp after every check. Sizes are int64 throughout: a packed
// batch of 2^20 tokens times 64 heads times 128 already overflows int32 element offsets.
#pragma once

#include <cstdint>

#include "hd.hpp"

namespace glr::cuda {

inline constexpr int kChunk = 64;  // C: the only chunk size the kernels take (Params kGpuChunks)

// One tensor: its first element, dtype and element strides. Token tensors use s = (batch, token, head,
// dim); per-token scalars (batch, token, head, -); a per-head gate (-, -, head, -); states (seq, head,
// k, v). Absent tensors have p == nullptr.
struct TensorRef {
  void* p = nullptr;
  DType dt = DType::f32;
  std::int64_t s[4] = {0, 0, 0, 0};

  GLR_HD std::int64_t at(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) const {
    return a * s[0] + b * s[1] + c * s[2] + d * s[3];
  }
  template <class Acc>
  GLR_HD Acc load(std::int64_t off) const {
    return load_elem<Acc>(p, dt, off);
  }
  template <class Acc>
  GLR_HD void store(std::int64_t off, Acc x) const {
    store_elem<Acc>(p, dt, off, x);
  }
};

enum GateCode : std::int32_t { kGateNone = 0, kGatePerToken = 1, kGatePerHead = 2 };

struct Problem {
  std::int64_t B = 1, T = 0, H = 1, HV = 1, N = 1;
  std::int32_t K = 0, V = 0;
  std::int64_t group = 1;       // HV / H
  std::int64_t rows = 0;        // B * T: token rows of every per-token workspace buffer (row = b*T + t)
  std::int64_t nt = 0;          // chunks per sequence without cu_seqlens: ceil(T / C)
  std::int64_t max_chunks = 0;  // grid size of every per-chunk stage: an upper bound on the chunk count
  double scale = 1.0;
  std::int32_t delta = 1;
  std::int32_t gate = kGatePerToken;
  std::int32_t varlen = 0;
  const void* cu = nullptr;  // device (or, emulated, host) offsets [N+1] when varlen: int64, or int32 if cu32
  std::int32_t cu32 = 0;
  // forward inputs and outputs
  TensorRef q, k, v, g, beta, h0, o, ht;
  // backward (q..h0 as above)
  TensorRef dout, dht, dq, dk, dv, dg, dbeta, dh0;
};

// fp32 (Acc) intermediates between stages; every stage's CPU twin can be diffed against these buffers.
template <class Acc>
struct Work {
  std::int32_t* status = nullptr;      // [1]  0, or 1 when the device found cu_seqlens invalid
  std::int64_t* chunk_off = nullptr;   // [N+1] first chunk of each sequence (varlen only)
  Acc* G = nullptr;    // [rows, HV]            in-chunk cumulative log-decay g_0 + ... + g_i
  Acc* Gr = nullptr;   // [rows, HV]            the same without the chunk's first gate, g_1 + ... + g_i
  Acc* A = nullptr;    // [max_chunks, HV, C, C] (I + L)^-1                    (delta only)
  Acc* W = nullptr;    // [rows, HV, K]          A diag(beta e^G) K             (delta only)
  Acc* U = nullptr;    // [rows, HV, V]          A diag(beta) V                 (delta only)
  Acc* S = nullptr;    // [max_chunks, HV, K, V] state entering each chunk
  Acc* Vn = nullptr;   // [rows, HV, V]          V_new = U - W S (the delta-corrected values)
  // backward
  Acc* dUl = nullptr;  // [rows, HV, V]          local dv: scale tril(Gamma . Q K^T)^T dO
  Acc* dVn = nullptr;  // [rows, HV, V]          gradient of V_new (dU in DESIGN.md)
  Acc* dS = nullptr;   // [max_chunks, HV, K, V] gradient of the state leaving each chunk
  Acc* dqp = nullptr;  // [rows, HV, K]          dq per value head (summed over the group later)
  Acc* dkp = nullptr;  // [rows, HV, K]          dk per value head
  Acc* dW = nullptr;   // [rows, HV, K]          gradient of W                   (delta only)
  Acc* dG = nullptr;   // [rows, HV]             gradient of the cumulative log-decay G
  Acc* dgc = nullptr;  // [max_chunks, HV]       per-chunk dg sums                (per-head gate only)
};

// Offset n of cu_seqlens, whichever integer width the caller gave.
GLR_HD GLR_INLINE std::int64_t cu_at(const Problem& p, std::int64_t n) {
  return p.cu32 ? static_cast<std::int64_t>(static_cast<const std::int32_t*>(p.cu)[n])
                : static_cast<const std::int64_t*>(p.cu)[n];
}

// Where chunk c lies. row0 indexes the per-token workspace buffers; (b, t0) the token tensors.
struct ChunkInfo {
  bool valid = false;
  std::int64_t c = 0, n = 0, b = 0, t0 = 0, row0 = 0;
  int len = 0;  // 1..C tokens
};

// Chunk c of a launch over max_chunks blocks: invalid past the real chunk count, or when the device
// found cu_seqlens invalid (then every stage does nothing and the poison stage writes NaN outputs).
GLR_HD inline ChunkInfo locate_chunk(const Problem& p, const std::int32_t* status, const std::int64_t* chunk_off,
                                     std::int64_t c) {
  ChunkInfo ci;
  ci.c = c;
  if (*status != 0) return ci;
  std::int64_t n, i, seq_begin, seq_end;
  if (!p.varlen) {
    if (p.nt == 0) return ci;
    n = c / p.nt;
    if (n >= p.B) return ci;
    i = c % p.nt;
    seq_begin = 0;
    seq_end = p.T;
    ci.b = n;
  } else {
    if (c >= chunk_off[p.N]) return ci;
    // The largest n with chunk_off[n] <= c: empty sequences share their offset with the next one, so
    // this lands on the non-empty sequence that owns chunk c.
    std::int64_t lo = 0, hi = p.N - 1;
    while (lo < hi) {
      const std::int64_t mid = (lo + hi + 1) / 2;
      if (chunk_off[mid] <= c)
        lo = mid;
      else
        hi = mid - 1;
    }
    n = lo;
    i = c - chunk_off[n];
    seq_begin = cu_at(p, n);
    seq_end = cu_at(p, n + 1);
    ci.b = 0;
  }
  ci.n = n;
  ci.t0 = seq_begin + i * kChunk;
  ci.len = static_cast<int>(min_of<std::int64_t>(kChunk, seq_end - ci.t0));
  ci.row0 = ci.b * p.T + ci.t0;
  ci.valid = true;
  return ci;
}

// Sequence n, for the stages that walk a sequence's chunks in order (the two state passes).
struct SeqInfo {
  bool valid = false;
  std::int64_t n = 0, b = 0, begin = 0, end = 0, c0 = 0, nchunks = 0;

  GLR_HD std::int64_t t0(std::int64_t i) const { return begin + i * kChunk; }
  GLR_HD int len(std::int64_t i) const { return static_cast<int>(min_of<std::int64_t>(kChunk, end - t0(i))); }
};

GLR_HD inline SeqInfo locate_seq(const Problem& p, const std::int32_t* status, const std::int64_t* chunk_off,
                                 std::int64_t n) {
  SeqInfo s;
  if (*status != 0 || n >= p.N) return s;
  s.n = n;
  if (p.varlen) {
    s.b = 0;
    s.begin = cu_at(p, n);
    s.end = cu_at(p, n + 1);
    s.c0 = chunk_off[n];
    s.nchunks = chunk_off[n + 1] - chunk_off[n];
  } else {
    s.b = n;
    s.begin = 0;
    s.end = p.T;
    s.c0 = n * p.nt;
    s.nchunks = p.nt;
  }
  s.valid = true;
  return s;
}

// Total chunks, once the chunk table exists (read on the device by the stages that reduce over chunks).
GLR_HD inline std::int64_t total_chunks(const Problem& p, const std::int64_t* chunk_off) {
  return p.varlen ? chunk_off[p.N] : p.B * p.nt;
}

// Upper bound on the chunk count, known on the host without reading cu_seqlens: each sequence of length
// l has ceil(l / C) <= (l + C - 1) / C chunks, and floors of a sum bound the sum of floors.
inline std::int64_t chunk_upper_bound(std::int64_t B, std::int64_t T, std::int64_t N, bool varlen) {
  if (!varlen) return B * ((T + kChunk - 1) / kChunk);
  return (T + N * (kChunk - 1)) / kChunk;
}

}  // namespace glr::cuda
