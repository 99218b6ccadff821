// glr/params.hpp: one problem of the gated-linear-recurrence family, as every glr implementation takes it
// (the float64 oracle, the chunked CPU algorithm, the CUDA kernels).
//
// Per sequence and value head the state S (K x V) follows
//
//     S_t = exp(g_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,     o_t = scale * S_t^T q_t
//
// (the decay applies before the delta read). docs/glr-math.md derives everything else.
//
// Layouts are those of flash-linear-attention, so tensors cross from PyTorch code without a transpose:
//
//     q, k, dq, dk          [B, T, H,  K]     heads outermost-but-two, head dim innermost
//     v, o, dv, dout        [B, T, HV, V]
//     g, beta, dg, dbeta    [B, T, HV]        gate = per_token; g, dg are [HV] for gate = per_head
//     h0, ht, dh0, dht      [N, HV, K, V]     N = B, or the number of packed sequences
//
// Value head hv reads query/key head hv / (HV / H) (grouped value heads, as flash-linear-attention's
// num_v_heads > num_heads). With cu_seqlens the batch is packed: B = 1, T is the total length, and sequence
// n occupies tokens [cu_seqlens[n], cu_seqlens[n+1]); chunks restart at every sequence start.
//
// All strides are in elements (as DLPack counts them), never bytes, and may be any non-negative values:
// inputs may overlap (a stride-0 broadcast is fine), outputs may not.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace glr {

// Thrown by Params::validate for a bad problem; argument() names the offending argument ("HV", "cu_seqlens",
// "strides.q", ...) so callers can map it back to their own parameter names.
class InvalidArgument : public std::invalid_argument {
 public:
  InvalidArgument(std::string argument, const std::string& what)
      : std::invalid_argument("glr: " + argument + ": " + what), argument_(std::move(argument)) {}
  const std::string& argument() const { return argument_; }

 private:
  std::string argument_;
};

// How the log-decay g enters.
enum class Gate : std::uint8_t {
  none,       // g = 0: no decay, no g tensor, no dg
  per_token,  // g [B, T, HV]: data-dependent, one value per token and value head
  per_head,   // g [HV]: one constant per value head (RetNet's log gamma_h); dg is its gradient summed over
              // every token of every sequence
};

// The five members DESIGN.md section 5 names; each is a setting of (delta, gate).
enum class Member : std::uint8_t { gated_deltanet, deltanet, mamba2, retnet, linear_attention };

struct Family {
  bool delta;  // the delta term (I - beta k k^T) and beta; without it S_t = e^{g_t} S_{t-1} + k_t v_t^T
  Gate gate;
};

constexpr Family family_of(Member m) {
  switch (m) {
    case Member::gated_deltanet: return {true, Gate::per_token};
    case Member::deltanet: return {true, Gate::none};
    case Member::mamba2: return {false, Gate::per_token};
    case Member::retnet: return {false, Gate::per_head};
    case Member::linear_attention: return {false, Gate::none};
  }
  return {true, Gate::per_token};
}
const char* name_of(Member m);  // "gated_deltanet", ...

inline constexpr std::int64_t kDefaultChunk = 64;

// What the GPU kernels take (issue 5). The CPU oracle and chunked algorithm accept any K, V >= 1 and any
// chunk >= 1; validate(Backend::gpu) enforces these lists. 256 is planned but not promised yet.
inline constexpr std::array<std::int64_t, 2> kGpuHeadDims = {64, 128};
inline constexpr std::array<std::int64_t, 1> kGpuChunks = {64};
enum class Backend : std::uint8_t { cpu, gpu };

// Which call a problem is validated for: the forward writes o (and ht); the backward reads the forward's
// inputs plus dout (and dht) and writes dq, dk, dv (dg, dbeta, dh0 where the member has them).
enum class Pass : std::uint8_t { forward, backward };

// Element strides of a token tensor [B, T, heads, dim].
struct TokenStrides {
  std::int64_t batch = 0, token = 0, head = 0, dim = 0;
};
// Element strides of a per-token scalar [B, T, HV]; a per-head gate [HV] uses only `head`.
struct ScalarStrides {
  std::int64_t batch = 0, token = 0, head = 0;
};
// Element strides of a state [N, HV, K, V].
struct StateStrides {
  std::int64_t seq = 0, head = 0, k = 0, v = 0;
};

struct Strides {
  // forward
  TokenStrides q, k, v, o;
  ScalarStrides g, beta;
  StateStrides h0, ht;
  // backward (dout is the gradient of o, dht of ht)
  TokenStrides dout, dq, dk, dv;
  ScalarStrides dg, dbeta;
  StateStrides dht, dh0;
};

struct Params {
  // Sizes. With cu_seqlens non-empty: B = 1, T = cu_seqlens.back().
  std::int64_t B = 1, T = 0;
  std::int64_t H = 1, HV = 1;  // query/key heads, value heads; HV % H == 0
  std::int64_t K = 0, V = 0;   // head dims of q/k and of v

  // Packed sequences: N+1 non-decreasing offsets from 0 to T (host copy; a zero-length sequence is valid
  // and passes its initial state through). Empty: B independent sequences of length T.
  std::vector<std::int64_t> cu_seqlens;

  double scale = 1.0;  // usually 1/sqrt(K): see default_scale
  std::int64_t chunk = kDefaultChunk;

  bool delta = true;  // family member: see family_of
  Gate gate = Gate::per_token;

  bool initial_state = false;  // h0 is given (else S_0 = 0); the backward then writes dh0
  bool final_state = false;    // the forward writes ht; the backward then reads dht

  Strides strides;

  // Derived sizes.
  bool varlen() const { return !cu_seqlens.empty(); }
  std::int64_t num_seqs() const { return varlen() ? static_cast<std::int64_t>(cu_seqlens.size()) - 1 : B; }
  std::int64_t group() const { return HV / H; }  // value heads per query/key head
  std::int64_t qk_head(std::int64_t hv) const { return hv / group(); }
  Family family() const { return {delta, gate}; }
  void set_member(Member m);

  // Every stride set to the dense row-major layout of the shapes above.
  void set_contiguous_strides();

  // Throws InvalidArgument naming the first bad argument. Checks sizes, HV % H, head dims and chunk
  // (against kGpuHeadDims/kGpuChunks for Backend::gpu), scale finite, cu_seqlens, and the strides of every
  // tensor the pass touches: none negative, and no two elements of one output at one address. Touches no
  // tensor data.
  void validate(Pass pass, Backend backend = Backend::cpu) const;
};

inline double default_scale(std::int64_t K) { return 1.0 / std::sqrt(static_cast<double>(K)); }

// A convenience for tests and callers that build a problem from scratch: dense strides, validated.
Params make_params(Member member, std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t HV,
                   std::int64_t K, std::int64_t V, std::vector<std::int64_t> cu_seqlens = {},
                   bool initial_state = false, bool final_state = false,
                   std::int64_t chunk = kDefaultChunk);

}  // namespace glr
