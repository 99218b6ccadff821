// tests/glr_sm90/emu_check.cpp: the sm90 tensor-core Gated DeltaNet forward (gdn_fwd_mma.cuh), run on the
// host through tests/glr_sm90/emu.hpp, against a float64 sequential recurrence. Small shapes (the emulator
// starts 128 host threads per block). Build and run: tests/glr_sm90/run_emu.sh. Exits non-zero on failure.
//
// Same bound as bench/glr/sm90_fwd_check.cu: normwise relative error <= 8 u (u = 2^-9) for o and ht, max
// error <= 32 u of the largest reference value; every output element written (NaN poison before the run).
#include "emu.hpp"
// clang-format off
#include "../../glr/cuda/sm90/gdn_fwd_mma.cuh"
// clang-format on

#include <cstdio>
#include <cstdlib>
#include <random>

namespace glr::cuda::sm90::gdn {
alignas(16) char smem_raw[256 * 1024];
}

namespace {

using glr::cuda::sm90::GdnFwdArgs;
namespace gdn = glr::cuda::sm90::gdn;
constexpr int KD = 128, VD = 128;

struct Shape {
  int B, T, H;
  bool h0;
  double mu;
};

// variant 1: P through the workspace; 2: Q K^T in the state kernel; 3: also V_new = T X there (GdnFwdVariant).
bool run(const Shape& p, unsigned seed, int variant) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd;
  const std::size_t tok = static_cast<std::size_t>(p.B) * p.T * p.H, hs = static_cast<std::size_t>(p.B) * p.H * KD * VD;
  std::vector<__nv_bfloat16> q(tok * KD), k(tok * KD), v(tok * VD), o(tok * VD);
  std::vector<float> g(tok), beta(tok), h0(p.h0 ? hs : 0), ht(hs);
  auto unit_rows = [&](std::vector<__nv_bfloat16>& x, bool unit) {
    for (std::size_t r = 0; r < tok; ++r) {
      double val[KD], ss = 0;
      for (int d = 0; d < KD; ++d) ss += (val[d] = nd(rng)) * val[d];
      for (int d = 0; d < KD; ++d) x[r * KD + d] = __float2bfloat16_rn(static_cast<float>(unit ? val[d] / std::sqrt(ss) : val[d]));
    }
  };
  unit_rows(q, true);
  unit_rows(k, true);
  unit_rows(v, false);
  for (std::size_t i = 0; i < tok; ++i) {
    g[i] = static_cast<float>(-std::log1p(std::exp(-(p.mu + nd(rng)))));
    beta[i] = static_cast<float>(1.0 / (1.0 + std::exp(-nd(rng))));
  }
  for (auto& x : h0) x = static_cast<float>(0.1 * nd(rng));

  GdnFwdArgs a;
  a.q = q.data();
  a.k = k.data();
  a.v = v.data();
  a.g = g.data();
  a.beta = beta.data();
  a.h0 = p.h0 ? h0.data() : nullptr;
  a.o = o.data();
  a.ht = ht.data();
  a.B = p.B;
  a.T = p.T;
  a.H = p.H;
  a.scale = 1.0f / std::sqrt(static_cast<float>(KD));
  const auto var = static_cast<glr::cuda::sm90::GdnFwdVariant>(variant);
  std::vector<std::uint64_t> ws((glr::cuda::sm90::gdn_fwd_workspace_bytes(p.B, p.T, p.H, var) + 7) / 8 + 32);
  glr::cuda::sm90::gdn_fwd_workspace_carve(a, ws.data(), var);  // rung 3: W = U = null
  const std::uint16_t nan16 = 0xffff;
  for (auto& x : o) std::memcpy(&x, &nan16, 2);
  for (auto& x : ht) x = std::nanf("");
  std::memset(ws.data(), 0x7f, ws.size() * 8);

  const int NT = (p.T + 63) / 64;
  if (variant == 1) {
    if (NT > 0) emu::launch(&gdn::wy_kernel<1>, NT, p.B * p.H, gdn::smem_raw, sizeof(gdn::WySmem), a);
    emu::launch(&gdn::state_kernel<false>, VD / gdn::VT, p.B * p.H, gdn::smem_raw, sizeof(gdn::StateSmem<false>), a);
  } else if (variant == 2) {
    if (NT > 0) emu::launch(&gdn::wy_kernel<2>, NT, p.B * p.H, gdn::smem_raw, sizeof(gdn::WySmem), a);
    emu::launch(&gdn::state_kernel<true>, VD / gdn::VT, p.B * p.H, gdn::smem_raw, sizeof(gdn::StateSmem<true>), a);
  } else {
    if (NT > 0) emu::launch(&gdn::wy_kernel<3>, NT, p.B * p.H, gdn::smem_raw, gdn::wy_smem_bytes(3), a);
    emu::launch(&gdn::state_t_kernel, VD / gdn::VT, p.B * p.H, gdn::smem_raw, sizeof(gdn::StateTSmem), a);
  }

  // float64 sequential recurrence
  std::vector<double> ro(tok * VD), rh(hs);
  for (int b = 0; b < p.B; ++b)
    for (int h = 0; h < p.H; ++h) {
      const std::size_t bh = static_cast<std::size_t>(b) * p.H + h;
      std::vector<double> S(KD * VD);
      for (int i = 0; i < KD * VD; ++i) S[i] = p.h0 ? h0[bh * KD * VD + i] : 0.0;
      for (int t = 0; t < p.T; ++t) {
        const std::size_t tk = (static_cast<std::size_t>(b) * p.T + t) * p.H + h;
        const double e = std::exp(static_cast<double>(g[tk])), bt = beta[tk];
        for (int c = 0; c < VD; ++c) {
          double kS = 0;
          for (int d = 0; d < KD; ++d) kS += static_cast<double>(__bfloat162float(k[tk * KD + d])) * S[d * VD + c];
          const double dn = bt * (static_cast<double>(__bfloat162float(v[tk * VD + c])) - e * kS);
          double os = 0;
          for (int d = 0; d < KD; ++d) {
            S[d * VD + c] = e * S[d * VD + c] + static_cast<double>(__bfloat162float(k[tk * KD + d])) * dn;
            os += static_cast<double>(__bfloat162float(q[tk * KD + d])) * S[d * VD + c];
          }
          ro[tk * VD + c] = a.scale * os;
        }
      }
      for (int i = 0; i < KD * VD; ++i) rh[bh * KD * VD + i] = S[i];
    }

  auto err = [](auto get, const std::vector<double>& r, double& rel2, double& relmax) {
    double d2 = 0, r2 = 0, dm = 0, rm = 0;
    bool finite = true;
    for (std::size_t i = 0; i < r.size(); ++i) {
      const double x = get(i);
      if (!std::isfinite(x)) finite = false;
      d2 += (x - r[i]) * (x - r[i]);
      r2 += r[i] * r[i];
      dm = std::max(dm, std::fabs(x - r[i]));
      rm = std::max(rm, std::fabs(r[i]));
    }
    rel2 = std::sqrt(d2 / std::max(r2, 1e-300));
    relmax = dm / std::max(rm, 1e-300);
    return finite;
  };
  double o2, om, h2, hm;
  const bool fo = err([&](std::size_t i) { return static_cast<double>(__bfloat162float(o[i])); }, ro, o2, om);
  const bool fh = err([&](std::size_t i) { return static_cast<double>(ht[i]); }, rh, h2, hm);
  const double u = std::ldexp(1.0, -9);
  const bool ok = fo && fh && o2 <= 8 * u && h2 <= 8 * u && om <= 32 * u && hm <= 32 * u;
  std::printf("emu v%d B%d T%-4d H%d h0=%d mu=%+.0f | o rel2 %.2e relmax %.2e finite %d | ht rel2 %.2e relmax %.2e finite %d | %s\n",
              variant, p.B, p.T, p.H, p.h0 ? 1 : 0, p.mu, o2, om, fo ? 1 : 0, h2, hm, fh ? 1 : 0, ok ? "PASS" : "FAIL");
  return ok;
}

}  // namespace

// gdn::invert_unit_lower alone: a random strictly lower L with entries up to 0.5 (T's entries then reach
// several units), against float64 forward substitution; max |T - T64| / max |T64| <= 1e-5 (fp32 arithmetic).
struct InvArgs {
  const float* L;
  float* T;
};
void inv_kernel(InvArgs a) {
  extern __attribute__((aligned(16))) char smem_raw[];
  float* L = reinterpret_cast<float*>(glr::cuda::sm90::gdn::smem_raw);
  const int tid = static_cast<int>(threadIdx.x);
  for (int e = tid; e < 64 * 64; e += 128) L[(e / 64) * gdn::LDL + e % 64] = a.L[e];
  __syncthreads();
  gdn::invert_unit_lower(L, tid, [&](int i, int j, float x) { a.T[i * 64 + j] = x; }, [](int) {});
}
bool inverse_check(unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> ud(-0.5, 0.5);
  std::vector<float> L(64 * 64, 0.f), T(64 * 64, std::nanf(""));
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < i; ++j) L[i * 64 + j] = static_cast<float>(ud(rng));
  emu::launch(&inv_kernel, 1, 1, gdn::smem_raw, 64 * gdn::LDL * 4, InvArgs{L.data(), T.data()});
  std::vector<double> R(64 * 64, 0.0);
  for (int j = 0; j < 64; ++j)
    for (int i = 0; i < 64; ++i) {
      double x = i == j ? 1.0 : 0.0;
      for (int m = 0; m < i; ++m) x -= L[i * 64 + m] * R[m * 64 + j];
      R[i * 64 + j] = x;
    }
  double dm = 0, rm = 0;
  bool finite = true;
  for (int e = 0; e < 64 * 64; ++e) {
    finite = finite && std::isfinite(T[e]);
    dm = std::max(dm, std::fabs(T[e] - R[e]));
    rm = std::max(rm, std::fabs(R[e]));
  }
  const bool ok = finite && dm <= 1e-5 * rm;
  std::printf("emu invert_unit_lower: max |T| %.2f, max error / max |T| %.2e | %s\n", rm, dm / rm, ok ? "PASS" : "FAIL");
  return ok;
}

// With arguments VARIANT B T H h0 mu: that one case only.
int main(int argc, char** argv) {
  if (argc == 7) {
    const Shape s{std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]), std::atoi(argv[5]) != 0, std::atof(argv[6])};
    return run(s, 99, std::atoi(argv[1])) ? 0 : 1;
  }
  const Shape shapes[] = {{1, 1, 1, false, 2.0}, {1, 33, 1, true, 2.0},   {1, 64, 1, false, -1.0},
                          {1, 100, 2, true, 2.0}, {2, 130, 1, false, 0.0}, {1, 192, 1, true, 4.0},
                          {1, 200, 1, true, 8.0}};
  bool ok = inverse_check(7);
  unsigned seed = 1;
  for (const Shape& s : shapes) {
    for (int variant = 1; variant <= 3; ++variant) ok = run(s, seed, variant) && ok;
    ++seed;
  }
  std::printf("%s\n", ok ? "ALL PASS" : "SOME FAILED");
  return ok ? 0 : 1;
}
