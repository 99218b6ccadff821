// glr/cuda/sm90/emu/emu_launch.cpp: the emulated launchers (sm90_emu.hpp), the kernels' shared memory, and the
// three CUDA runtime calls forward.cu and backward.cu make on the host.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "sm90_emu.hpp"

// The kernels' `extern __shared__` arrays: the forward's kernels (namespace gdn; the backward runs its wy kernel)
// and the backward's own. Blocks run one after another (emu::launch), so one array each serves every block.
namespace glr::cuda::sm90::gdn {
alignas(16) char smem_raw[256 * 1024];
}
namespace glr::cuda::sm90::gdn_bwd {
alignas(16) char smem_raw[256 * 1024];
}

// The CUDA runtime as the host code uses it here: memory is host memory, nothing is asynchronous. No cudart is
// linked into the emulator's libraries, so these are the only definitions.
extern "C" cudaError_t cudaMemsetAsync(void* p, int value, std::size_t bytes, cudaStream_t) {
  std::memset(p, value, bytes);
  return cudaSuccess;
}
extern "C" const char* cudaGetErrorName(cudaError_t e) {
  return e == cudaSuccess ? "cudaSuccess" : e == cudaErrorInvalidValue ? "cudaErrorInvalidValue" : "cudaError";
}
extern "C" const char* cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : e == cudaErrorInvalidValue ? "invalid argument" : "an emulated launch failed";
}

namespace glr::cuda::sm90 {
namespace {

template <int N>
using Int = std::integral_constant<int, N>;

// Calls f(Int<vt>{}) for a slice width of 64, 32 or 16.
template <class F>
void with_width(int vt, F&& f) {
  if (vt == 64)
    f(Int<64>{});
  else if (vt == 32)
    f(Int<32>{});
  else
    f(Int<16>{});
}

// gdn_fwd_mma_launch<3, kDelta, kD> (gdn_fwd_mma.cuh): chunk table, wy kernel, the split pass's passes A and B,
// the state kernel at width vt, poison kernel.
template <bool kDelta, int kD>
void forward_rung3(const GdnFwdArgs& a, int vt) {
  using namespace gdn;
  if (a.varlen()) emu::launch(&chunk_table_kernel, 1, 1, smem_raw, table_smem_bytes, a);
  const long long wy_cols = a.varlen() ? a.chunk_slots() : (a.T + C - 1) / C;
  const int wy_rows = a.varlen() ? a.HV : a.B * a.HV;
  const int heads = a.num_seqs() * a.HV;
  if (wy_cols > 0)
    emu::launch(&wy_kernel<3, kDelta, kD>, static_cast<int>(wy_cols), wy_rows, smem_raw, wy_smem_bytes(3), a);
  if (a.segs > 1) {  // launch_split_ab: pass A (E blocks, with the delta rule M blocks too), pass B
    emu::launch(&state_t_kernel<kDelta, kD, 64, true>, (kDelta ? 2 : 1) * kD / 64, (a.segs - 1) * heads, smem_raw,
                sizeof(StateTSmem<64>), a);
    if (a.segs > 2) emu::launch(&combine_kernel<kD, kDelta>, kD / 8, heads, smem_raw, combine_smem_bytes(kD), a);
  }
  with_width(vt, [&](auto w) {
    constexpr int kVT = decltype(w)::value;
    emu::launch(&state_t_kernel<kDelta, kD, kVT>, kD / kVT, a.segs * heads, smem_raw, sizeof(StateTSmem<kVT>), a);
  });
  // A grid-stride loop: 2 blocks of the emulator's 128 threads do what 256 x 256 do on the GPU.
  if (a.varlen()) emu::launch(&poison_kernel, 2, 1, smem_raw, 16, a);
}

// gdn_bwd::launch_all<kD, kDelta> (gdn_bwd_mma.cuh): chunk table, the forward's wy kernel, h and dh at width a.vt,
// chunk kernel, the per-head dg sums (RetNet), the group sums (GVA), poison kernel.
template <int kD, bool kDelta>
void backward_all(const GdnBwdArgs& a) {
  const long long NT = a.varlen() ? a.chunk_slots() : (a.T + gdn::C - 1) / gdn::C;
  const int BH = a.varlen() ? a.HV : a.B * a.HV;
  if (a.varlen()) emu::launch(&gdn::chunk_table_kernel, 1, 1, gdn::smem_raw, gdn::table_smem_bytes, gdn_bwd::wy_args(a));
  if (NT > 0)
    emu::launch(&gdn::wy_kernel<3, kDelta, kD>, static_cast<int>(NT), BH, gdn::smem_raw, gdn::wy_smem_bytes(3),
                gdn_bwd::wy_args(a));
  with_width(a.vt, [&](auto w) {
    constexpr int kVT = decltype(w)::value;
    const int rows = a.num_seqs() * a.value_heads();
    if (a.T > 0)  // launch_state_passes: h only where there are chunks
      emu::launch(&gdn_bwd::h_kernel<kVT, kD, kDelta>, kD / kVT, rows, gdn_bwd::smem_raw,
                  sizeof(gdn_bwd::HSmem<kVT, kD>), a);
    emu::launch(&gdn_bwd::dh_kernel<kVT, kD, kDelta>, kD / kVT, rows, gdn_bwd::smem_raw,
                sizeof(gdn_bwd::DhSmem<kVT, kD>), a);
  });
  if (NT > 0)
    emu::launch(&gdn_bwd::chunk_kernel<kD, kDelta>, static_cast<int>(NT), BH, gdn_bwd::smem_raw,
                sizeof(gdn_bwd::ChunkSmem<kD>), a);
  if (a.gate == 2)  // one g per value head: the sum of the chunks' shares
    emu::launch(&gdn_bwd::dg_head_kernel, a.HV, 1, gdn_bwd::smem_raw, gdn_bwd::dg_head_smem_bytes, a);
  if (a.T > 0 && a.HV > a.H) {  // GVA: the group sums of dq and dk (grid-stride: a few blocks suffice)
    const long long n4 = static_cast<long long>(a.B) * a.T * a.H * (kD / 4);
    emu::launch(&gdn_bwd::group_kernel<kD>, static_cast<int>(std::min<long long>(3, (n4 + 127) / 128)), 1,
                gdn_bwd::smem_raw, 0, a);
  }
  if (a.varlen()) emu::launch(&gdn_bwd::poison_kernel, 2, 1, gdn_bwd::smem_raw, 0, a);
}

}  // namespace

cudaError_t gdn_fwd_mma(GdnFwdArgs a, cudaStream_t, GdnFwdVariant variant, cudaEvent_t, int vt) {
  if (a.HV == 0) a.HV = a.H;
  if (variant != GdnFwdVariant::t_only || gdn_fwd_mma_refusal(a, variant) != nullptr) return cudaErrorInvalidValue;
  if (vt != 0 && vt != 16 && vt != 32 && vt != 64) return cudaErrorInvalidValue;
  if (vt == 0) vt = gdn_fwd_slice_width(a, state_slice_sms());
  if (a.D == 64)
    a.delta ? forward_rung3<true, 64>(a, vt) : forward_rung3<false, 64>(a, vt);
  else
    a.delta ? forward_rung3<true, 128>(a, vt) : forward_rung3<false, 128>(a, vt);
  return cudaSuccess;
}

cudaError_t gdn_bwd_mma(const GdnBwdArgs& args, cudaStream_t, cudaEvent_t*, int vt) {
  if (gdn_bwd_mma_refusal(args) != nullptr || (vt != 0 && vt != 16 && vt != 32 && vt != 64) || vt > args.D)
    return cudaErrorInvalidValue;
  GdnBwdArgs a = args;
  a.HV = a.value_heads();
  a.vt = vt != 0 ? vt : state_slice_width(static_cast<long long>(a.num_seqs()) * a.HV, a.D);
  if (a.delta)
    a.D == 64 ? backward_all<64, true>(a) : backward_all<128, true>(a);
  else
    a.D == 64 ? backward_all<64, false>(a) : backward_all<128, false>(a);
  return cudaSuccess;
}

}  // namespace glr::cuda::sm90
