// Validation of a glr problem: every check names the argument it rejects, and none touches tensor data, so
// the CUDA entry points can call it on the host before any launch.
#include "glr/params.hpp"
#include "glr/tensors.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

namespace glr {

namespace {

std::string str(std::int64_t x) { return std::to_string(x); }

template <class List>
bool contains(const List& list, std::int64_t x) {
  return std::find(list.begin(), list.end(), x) != list.end();
}

template <class List>
std::string join(const List& list) {
  std::string s;
  for (auto x : list) s += (s.empty() ? "" : ", ") + str(x);
  return s;
}

// One tensor as validate sees it: extents and strides, outermost first.
struct Extent {
  std::int64_t size, stride;
};

void check_strides(const std::string& name, std::vector<Extent> dims, bool is_output) {
  for (const auto& d : dims)
    if (d.stride < 0)
      throw InvalidArgument("strides." + name, "negative stride " + str(d.stride) +
                                                   " (glr takes non-negative element strides only)");
  if (!is_output) return;  // an input may broadcast (stride 0) or overlap itself: it is only read
  // Sufficient condition for no two elements sharing an address: ordered by stride, each stride exceeds
  // the farthest offset reachable with the smaller ones. Every permuted dense or padded layout passes.
  if (std::any_of(dims.begin(), dims.end(), [](const Extent& d) { return d.size == 0; })) return;  // empty
  std::erase_if(dims, [](const Extent& d) { return d.size == 1; });  // an extent-1 dim's stride is unused
  std::sort(dims.begin(), dims.end(), [](const Extent& a, const Extent& b) { return a.stride < b.stride; });
  std::int64_t reach = 0;  // largest offset reachable with the dims so far
  for (const auto& d : dims) {
    if (d.stride <= reach)
      throw InvalidArgument("strides." + name, "output elements overlap (stride " + str(d.stride) +
                                                   " of an extent-" + str(d.size) + " dim is within " +
                                                   str(reach) + " of the smaller strides)");
    reach += d.stride * (d.size - 1);
  }
}

}  // namespace

const char* name_of(Member m) {
  switch (m) {
    case Member::gated_deltanet: return "gated_deltanet";
    case Member::deltanet: return "deltanet";
    case Member::mamba2: return "mamba2";
    case Member::retnet: return "retnet";
    case Member::linear_attention: return "linear_attention";
  }
  return "?";
}

void Params::set_member(Member m) {
  const Family f = family_of(m);
  delta = f.delta;
  gate = f.gate;
}

void Params::set_contiguous_strides() {
  auto tok = [&](std::int64_t heads, std::int64_t dim) {
    return TokenStrides{T * heads * dim, heads * dim, dim, 1};
  };
  auto scalar = [&]() { return ScalarStrides{T * HV, HV, 1}; };
  auto state = [&]() { return StateStrides{HV * K * V, K * V, V, 1}; };
  Strides& s = strides;
  s.q = s.k = s.dq = s.dk = tok(H, K);
  s.v = s.o = s.dout = s.dv = tok(HV, V);
  s.g = s.dg = gate == Gate::per_head ? ScalarStrides{0, 0, 1} : scalar();
  s.beta = s.dbeta = scalar();
  s.h0 = s.ht = s.dht = s.dh0 = state();
}

void Params::validate(Pass pass, Backend backend) const {
  // Sizes first: every later message may quote them.
  if (B < 1) throw InvalidArgument("B", "batch size must be >= 1, got " + str(B));
  if (T < 0) throw InvalidArgument("T", "length must be >= 0, got " + str(T));
  if (H < 1) throw InvalidArgument("H", "query/key heads must be >= 1, got " + str(H));
  if (HV < 1) throw InvalidArgument("HV", "value heads must be >= 1, got " + str(HV));
  if (HV % H != 0)
    throw InvalidArgument("HV", "value heads HV = " + str(HV) + " must be a multiple of H = " + str(H));
  for (auto [name, dim] : {std::pair{"K", K}, std::pair{"V", V}}) {
    if (dim < 1) throw InvalidArgument(name, "head dim must be >= 1, got " + str(dim));
    if (backend == Backend::gpu && !contains(kGpuHeadDims, dim))
      throw InvalidArgument(name, "head dim " + str(dim) + " is not supported on the GPU (supported: " +
                                      join(kGpuHeadDims) + ")");
  }
  if (chunk < 1) throw InvalidArgument("chunk", "chunk size must be >= 1, got " + str(chunk));
  if (backend == Backend::gpu && !contains(kGpuChunks, chunk))
    throw InvalidArgument("chunk", "chunk size " + str(chunk) + " is not supported on the GPU (supported: " +
                                       join(kGpuChunks) + ")");
  if (!std::isfinite(scale)) throw InvalidArgument("scale", "must be finite, got " + std::to_string(scale));

  if (varlen()) {
    if (B != 1) throw InvalidArgument("B", "must be 1 with cu_seqlens (packed sequences), got " + str(B));
    if (cu_seqlens.size() < 2)
      throw InvalidArgument("cu_seqlens", "needs at least 2 offsets (one sequence), got " +
                                              str(static_cast<std::int64_t>(cu_seqlens.size())));
    if (cu_seqlens.front() != 0)
      throw InvalidArgument("cu_seqlens", "cu_seqlens[0] must be 0, got " + str(cu_seqlens.front()));
    for (std::size_t i = 1; i < cu_seqlens.size(); ++i)
      if (cu_seqlens[i] < cu_seqlens[i - 1])
        throw InvalidArgument("cu_seqlens", "offsets must be non-decreasing: cu_seqlens[" + str(i) + "] = " +
                                                str(cu_seqlens[i]) + " < cu_seqlens[" + str(i - 1) +
                                                "] = " + str(cu_seqlens[i - 1]));
    if (cu_seqlens.back() != T)
      throw InvalidArgument("cu_seqlens", "last offset cu_seqlens[" + str(num_seqs()) + "] = " +
                                              str(cu_seqlens.back()) + " must equal the total length T = " +
                                              str(T));
  }

  // Strides of every tensor the pass touches.
  const Strides& s = strides;
  const std::int64_t N = num_seqs();
  auto tok = [&](const char* name, const TokenStrides& t, std::int64_t heads, std::int64_t dim, bool out) {
    check_strides(name, {{B, t.batch}, {T, t.token}, {heads, t.head}, {dim, t.dim}}, out);
  };
  auto scalar = [&](const char* name, const ScalarStrides& t, bool out) {
    check_strides(name, {{B, t.batch}, {T, t.token}, {HV, t.head}}, out);
  };
  auto gate_tensor = [&](const char* name, const ScalarStrides& t, bool out) {
    if (gate == Gate::per_head)
      check_strides(name, {{HV, t.head}}, out);  // a constant gate is [HV]
    else
      scalar(name, t, out);
  };
  auto state = [&](const char* name, const StateStrides& t, bool out) {
    check_strides(name, {{N, t.seq}, {HV, t.head}, {K, t.k}, {V, t.v}}, out);
  };
  const bool has_g = gate != Gate::none;
  tok("q", s.q, H, K, false);
  tok("k", s.k, H, K, false);
  tok("v", s.v, HV, V, false);
  if (has_g) gate_tensor("g", s.g, false);
  if (delta) scalar("beta", s.beta, false);
  if (initial_state) state("h0", s.h0, false);
  if (pass == Pass::forward) {
    tok("o", s.o, HV, V, true);
    if (final_state) state("ht", s.ht, true);
    return;
  }
  tok("dout", s.dout, HV, V, false);
  if (final_state) state("dht", s.dht, false);
  tok("dq", s.dq, H, K, true);
  tok("dk", s.dk, H, K, true);
  tok("dv", s.dv, HV, V, true);
  if (has_g) gate_tensor("dg", s.dg, true);
  if (delta) scalar("dbeta", s.dbeta, true);
  if (initial_state) state("dh0", s.dh0, true);
}

void check_pointer(const char* name, const void* ptr, bool needed, std::int64_t elements) {
  if (needed && ptr == nullptr && elements > 0)
    throw InvalidArgument(name, "is null but the problem needs it (" + str(elements) + " elements)");
  if (!needed && ptr != nullptr)
    throw InvalidArgument(name, "is given but the problem has no such tensor (check delta, gate, "
                                "initial_state and final_state)");
}

Params make_params(Member member, std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t HV,
                   std::int64_t K, std::int64_t V, std::vector<std::int64_t> cu_seqlens, bool initial_state,
                   bool final_state, std::int64_t chunk) {
  Params p;
  p.B = B;
  p.T = T;
  p.H = H;
  p.HV = HV;
  p.K = K;
  p.V = V;
  p.cu_seqlens = std::move(cu_seqlens);
  p.scale = K > 0 ? default_scale(K) : 1.0;
  p.chunk = chunk;
  p.set_member(member);
  p.initial_state = initial_state;
  p.final_state = final_state;
  p.set_contiguous_strides();
  p.validate(Pass::backward);
  return p;
}

}  // namespace glr
