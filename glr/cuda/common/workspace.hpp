// glr/cuda/common/workspace.hpp: where each intermediate lives in one workspace buffer. The same plan
// serves the GPU (a device allocation), the emulator (host memory) and the tests that copy a GPU
// workspace back to diff every stage against its host twin.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "problem.hpp"

namespace glr::cuda {

inline constexpr std::size_t kWorkspaceAlign = 256;

// Lays the buffers out from `base` (null: only sizes them). The status word comes first, so
// workspace_status() finds it at offset 0.
template <class Acc>
struct WorkspacePlan {
  Work<Acc> w;
  std::size_t bytes = 0;

  WorkspacePlan(const Problem& p, bool backward, char* base) {
    auto take = [&](auto*& ptr, std::int64_t count) {
      using T = std::remove_reference_t<decltype(*ptr)>;
      bytes = (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
      ptr = base ? reinterpret_cast<T*>(base + bytes) : nullptr;
      bytes += sizeof(T) * static_cast<std::size_t>(count > 0 ? count : 0);
    };
    const std::int64_t C = kChunk, HV = p.HV, K = p.K, V = p.V, rows = p.rows, mc = p.max_chunks;
    take(w.status, 1);
    take(w.chunk_off, p.N + 1);
    take(w.G, rows * HV);
    take(w.Gr, rows * HV);
    if (p.delta) {
      take(w.A, mc * HV * C * C);
      take(w.W, rows * HV * K);
      take(w.U, rows * HV * V);
    }
    take(w.S, mc * HV * K * V);
    take(w.Vn, rows * HV * V);
    if (backward) {
      take(w.dUl, rows * HV * V);
      take(w.dVn, rows * HV * V);
      take(w.dS, mc * HV * K * V);
      take(w.dqp, rows * HV * K);
      take(w.dkp, rows * HV * K);
      if (p.delta) take(w.dW, rows * HV * K);
      take(w.dG, rows * HV);
      if (p.gate == kGatePerHead) take(w.dgc, mc * HV);
    }
    bytes = (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
  }
};

}  // namespace glr::cuda
