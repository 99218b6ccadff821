// glr/cuda/common/block.hpp: a thread block written as a sequence of phases, so it runs on the GPU and on
// the host alike.
//
// A stage's block program is a GLR_HD function template over a Block type. Its body is block-uniform
// control flow (loops over chunks, early exits that every thread takes alike) around calls
//
//     blk.each([&](int tid) { ... this thread's work ... });
//
// each() runs the lambda for every thread and then a barrier: on the GPU it is f(threadIdx.x) followed by
// __syncthreads(); on the host (HostBlock) it loops over the threads. The discipline that makes both the
// same program:
//   * outside each(), code only reads (uniform values, shared memory written by an earlier phase);
//   * inside one phase, no thread reads shared memory that another thread writes in that same phase;
//   * values a thread keeps from one phase to the next live in Regs<R> (registers on the GPU, one R per
//     thread on the host), everything else in shared memory.
// The emulator checks the second rule by running the threads of every phase in ascending and in
// descending order and demanding bitwise-identical results.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "hd.hpp"

namespace glr::cuda {

// Block index of a launch (x may exceed 65535; y and z stay below it).
struct BlockIdx {
  std::int64_t x;
  int y, z;
};

// Carves typed arrays out of a shared-memory buffer, each 16-byte aligned. With a null base it only
// counts, so a stage's smem_bytes() is the same code as its layout.
class Carver {
 public:
  GLR_HD explicit Carver(char* base) : base_(base) {}
  template <class T>
  GLR_HD T* take(std::int64_t count) {
    used_ = (used_ + 15) & ~static_cast<std::size_t>(15);
    T* p = base_ ? reinterpret_cast<T*>(base_ + used_) : nullptr;
    used_ += sizeof(T) * static_cast<std::size_t>(count);
    return p;
  }
  GLR_HD std::size_t bytes() const { return (used_ + 15) & ~static_cast<std::size_t>(15); }

 private:
  char* base_;
  std::size_t used_ = 0;
};

#if defined(__CUDACC__)
// The real thing: every thread of the block runs the program; each() is one phase.
struct DeviceBlock {
  template <class R>
  struct Regs {
    R r;
    GLR_HD explicit Regs(DeviceBlock&) : r() {}
    GLR_HD R& operator[](int) { return r; }
  };
  template <class F>
  GLR_HD GLR_INLINE void each(F&& f) {
#if defined(__CUDA_ARCH__)
    f(static_cast<int>(threadIdx.x));
    __syncthreads();
#else
    (void)f;
#endif
  }
};
#endif

// Host emulation of writers that run at once over one region (threads of a phase over shared memory,
// blocks of a launch over the workspace): each writer starts from the region as it was before all of
// them, and what each changed is merged at the end, so a writer that reads another's write sees the old
// value (what no barrier orders, no writer may rely on).
class ConcurrentRegion {
 public:
  ConcurrentRegion(char* p, std::size_t bytes) : p_(p), before_(p, p + bytes), merged_(before_) {}
  void begin_writer() { std::memcpy(p_, before_.data(), before_.size()); }
  void end_writer() {
    for (std::size_t i = 0; i < before_.size(); ++i)
      if (p_[i] != before_[i]) merged_[i] = p_[i];
  }
  void finish() { std::memcpy(p_, merged_.data(), merged_.size()); }

 private:
  char* p_;
  std::vector<char> before_, merged_;
};

// The host emulation of one block: phases run one after the other, threads in the chosen order.
struct HostBlock {
  int threads;
  bool descending = false;  // run each phase's threads last to first (race check)
  char* smem = nullptr;     // with concurrent: every thread of a phase sees shared memory as it was
  std::size_t smem_bytes = 0;  // before the phase (what no barrier orders, no thread may rely on)
  bool concurrent = false;

  template <class R>
  struct Regs {
    std::vector<R> r;
    explicit Regs(HostBlock& b) : r(static_cast<std::size_t>(b.threads)) {}
    R& operator[](int tid) { return r[static_cast<std::size_t>(tid)]; }
  };
  template <class F>
  void each(F&& f) {
    if (concurrent && smem) {
      ConcurrentRegion region(smem, smem_bytes);
      for (int t = 0; t < threads; ++t) {
        region.begin_writer();
        f(t);
        region.end_writer();
      }
      region.finish();
      return;
    }
    if (descending)
      for (int t = threads - 1; t >= 0; --t) f(t);
    else
      for (int t = 0; t < threads; ++t) f(t);
  }
};

}  // namespace glr::cuda
