// glr's one binder from a kgate_call to Params (glr/kgate/binding.hpp), and every library that reads its
// calls through it: the CPU kgate libraries (kgate_run, kgate_oracle) and the CUDA kernels' host emulation
// (glr_cuda_emu_kgate_*, the same glr/cuda/abi code as the GPU libraries). The same bad call gets the same
// status and the same one-line message from every one of them, and writes nothing; where the kernels take
// less than the CPU algorithms (head dims, chunk, dtypes, contiguous device offsets) they refuse; invalid
// packed offsets, which the kernels read on the device, come back as NaN outputs, never a silent result.
//
// The cases marked "differed" are those where glr/cuda/abi used to answer otherwise: a call bind() rejects
// was KGATE_REFUSED from the kernels' libraries (KGATE_ERROR from the CPU ones), problems Params::validate
// rejects were checked only by the kernels' setup (again KGATE_REFUSED), and an explicit NaN scale, a
// repeated attr and tensors on two devices were read without complaint by both.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "binding.hpp"
#include "kgate/abi.h"

namespace glr::kgate_export {
namespace {

constexpr DLDataType kBf16{kDLBfloat, 16, 1}, kF32{kDLFloat, 32, 1}, kI32{kDLInt, 32, 1};

// A Gated DeltaNet call with h0 and ht: packed by default (three sequences, one empty), K = V = 64 and
// bf16 token tensors, so both the CPU algorithms and the kernels take it.
struct Spec {
  bool backward = false;
  std::int64_t B = 1, T = 7, H = 1, HV = 2, K = 64, V = 64;
  std::vector<std::int32_t> cu = {0, 3, 3, 7};  // empty: a fixed batch of B sequences
  DLDataType token = kBf16;
  double chunk = 64;
};

struct Buffer {
  std::vector<std::int64_t> shape, strides;
  DLDataType dtype{};
  std::vector<unsigned char> bytes;
};

std::int64_t count(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::vector<std::int64_t> row_major(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> s(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d)
    s[static_cast<std::size_t>(d)] = s[static_cast<std::size_t>(d) + 1] * shape[static_cast<std::size_t>(d) + 1];
  return s;
}

// A float tensor holding value(i) at element i (bf16: the float's upper half).
Buffer floats(std::vector<std::int64_t> shape, DLDataType dtype, const std::function<float(std::int64_t)>& value) {
  Buffer b{shape, row_major(shape), dtype, {}};
  const std::int64_t n = count(shape);
  b.bytes.resize(static_cast<std::size_t>(n * dtype.bits / 8));
  for (std::int64_t i = 0; i < n; ++i) {
    const float x = value(i);
    if (dtype.bits == 16) {
      std::uint32_t bits;
      std::memcpy(&bits, &x, 4);
      const auto half = static_cast<std::uint16_t>(bits >> 16);
      std::memcpy(&b.bytes[static_cast<std::size_t>(i) * 2], &half, 2);
    } else {
      std::memcpy(&b.bytes[static_cast<std::size_t>(i) * 4], &x, 4);
    }
  }
  return b;
}

Buffer offsets(const std::vector<std::int32_t>& cu) {
  Buffer b{{static_cast<std::int64_t>(cu.size())}, {1}, kI32, {}};
  b.bytes.resize(cu.size() * 4);
  std::memcpy(b.bytes.data(), cu.data(), b.bytes.size());
  return b;
}

// The call's tensors (binding.hpp's order), attrs and message; outputs prefilled with `fill` bytes.
class Call {
 public:
  explicit Call(const Spec& s, unsigned char fill = 0xff) {
    const std::int64_t N = s.cu.empty() ? s.B : static_cast<std::int64_t>(s.cu.size()) - 1;
    auto normal = [](std::int64_t i) { return 0.05f * static_cast<float>((i * 37) % 19 - 9); };
    add_in("q", floats({s.B, s.T, s.H, s.K}, s.token, normal));
    auto small = [](std::int64_t i) { return 0.01f * static_cast<float>(i % 7 - 3); };
    add_in("k", floats({s.B, s.T, s.H, s.K}, s.token, small));
    add_in("v", floats({s.B, s.T, s.HV, s.V}, s.token, normal));
    add_in("g", floats({s.B, s.T, s.HV}, kF32, [](std::int64_t i) { return -0.1f * static_cast<float>(i % 3); }));
    add_in("beta", floats({s.B, s.T, s.HV}, s.token, [](std::int64_t) { return 0.5f; }));
    add_in("h0", floats({N, s.HV, s.K, s.V}, kF32, normal));
    if (s.backward) {
      add_in("dout", floats({s.B, s.T, s.HV, s.V}, s.token, normal));
      add_in("dht", floats({N, s.HV, s.K, s.V}, kF32, normal));
    }
    if (!s.cu.empty()) add_in("cu_seqlens", offsets(s.cu));
    auto zeros = [](std::int64_t) { return 0.0f; };
    if (!s.backward) {
      add_out("o", floats({s.B, s.T, s.HV, s.V}, s.token, zeros));
      add_out("ht", floats({N, s.HV, s.K, s.V}, kF32, zeros));
    } else {
      add_out("dq", floats({s.B, s.T, s.H, s.K}, s.token, zeros));
      add_out("dk", floats({s.B, s.T, s.H, s.K}, s.token, zeros));
      add_out("dv", floats({s.B, s.T, s.HV, s.V}, s.token, zeros));
      add_out("dg", floats({s.B, s.T, s.HV}, kF32, zeros));
      add_out("dbeta", floats({s.B, s.T, s.HV}, s.token, zeros));
      add_out("dh0", floats({N, s.HV, s.K, s.V}, kF32, zeros));
    }
    for (Buffer& b : out_) std::memset(b.bytes.data(), fill, b.bytes.size());
    fill_ = fill;
    attrs = {{"scale", 0.125}, {"chunk", s.chunk}, {"delta", 1}, {"gate", 1}, {"initial_state", 1}, {"final_state", 1}};
    if (!s.cu.empty()) attrs.push_back({"varlen", 1});
    for (Buffer& b : in_) in_dl.push_back(dl(b));
    for (Buffer& b : out_) out_dl.push_back(dl(b));
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  // What a spoiler edits before the call: tensors by name, the attrs, the ABI version.
  Buffer& in(const std::string& name) { return in_[index_.at(name)]; }
  DLTensor& in_t(const std::string& name) { return in_dl[index_.at(name)]; }
  DLTensor& out_t(const std::string& name) { return out_dl[out_index_.at(name)]; }
  std::vector<DLTensor> in_dl, out_dl;
  std::vector<kgate_attr> attrs;
  std::int32_t abi_version = KGATE_ABI_VERSION;

  kgate_call call() {
    kgate_call k{};
    k.abi_version = abi_version;
    k.n_inputs = static_cast<std::int32_t>(in_dl.size());
    k.n_outputs = static_cast<std::int32_t>(out_dl.size());
    k.n_attrs = static_cast<std::int32_t>(attrs.size());
    k.inputs = in_dl.data();
    k.outputs = out_dl.data();
    k.attrs = attrs.data();
    k.message = message;
    k.message_capacity = sizeof(message);
    return k;
  }
  bool outputs_untouched() const {
    for (const Buffer& b : out_)
      for (unsigned char c : b.bytes)
        if (c != fill_) return false;
    return true;
  }
  // Every output element NaN (bf16 and f32 outputs).
  bool outputs_all_nan() const {
    for (const Buffer& b : out_)
      for (std::size_t i = 0; i < b.bytes.size(); i += b.dtype.bits / 8) {
        if (b.dtype.bits == 16) {
          std::uint16_t x;
          std::memcpy(&x, &b.bytes[i], 2);
          if ((x & 0x7f80) != 0x7f80 || (x & 0x7f) == 0) return false;
        } else {
          float x;
          std::memcpy(&x, &b.bytes[i], 4);
          if (x == x) return false;
        }
      }
    return true;
  }
  char message[512] = {};

 private:
  static DLTensor dl(Buffer& b) {
    DLTensor d{};
    d.data = b.bytes.data();
    d.device = {kDLCPU, 0};
    d.ndim = static_cast<int>(b.shape.size());
    d.dtype = b.dtype;
    d.shape = b.shape.data();
    d.strides = b.strides.data();
    return d;
  }
  void add_in(const std::string& name, Buffer b) {
    index_[name] = in_.size();
    in_.push_back(std::move(b));
  }
  void add_out(const std::string& name, Buffer b) {
    out_index_[name] = out_.size();
    out_.push_back(std::move(b));
  }
  std::vector<Buffer> in_, out_;
  std::map<std::string, std::size_t> index_, out_index_;
  unsigned char fill_ = 0xff;
};

// One entry point of one library, loaded with dlopen as kgate loads it.
struct Entry {
  std::string label;
  kgate_entry_fn fn = nullptr;
};

void* open_library(const char* path) {
  static std::map<std::string, void*> open;
  void*& h = open[path];
  if (!h) h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  return h;
}

Entry entry(const char* path, const char* symbol, const std::string& label) {
  void* h = open_library(path);
  EXPECT_NE(h, nullptr) << path << ": " << dlerror();
  Entry e{label, h ? reinterpret_cast<kgate_entry_fn>(dlsym(h, symbol)) : nullptr};
  EXPECT_NE(e.fn, nullptr) << path << ": no " << symbol;
  return e;
}

bool have_emulation() {
#ifdef GLR_EMU_FWD_PATH
  return true;
#else
  return false;
#endif
}

// The CPU libraries' entries of a pass (the chunked algorithm and the float64 oracle).
std::vector<Entry> cpu_entries(bool backward) {
  const char* lib = backward ? GLR_KGATE_BWD_PATH : GLR_KGATE_FWD_PATH;
  return {entry(lib, "kgate_run", "cpu kgate_run"), entry(lib, "kgate_oracle", "cpu kgate_oracle")};
}

// The kernels' emulation entries of a pass (kgate_run_blocks is the GPU library's other symbol).
std::vector<Entry> emu_entries(bool backward) {
#ifdef GLR_EMU_FWD_PATH
  const char* lib = backward ? GLR_EMU_BWD_PATH : GLR_EMU_FWD_PATH;
  return {entry(lib, "kgate_run", "emu kgate_run"), entry(lib, "kgate_run_blocks", "emu kgate_run_blocks")};
#else
  (void)backward;
  return {};
#endif
}

struct Outcome {
  std::int32_t status = -1;
  std::string message;
  bool untouched = false;
};

using Spoil = std::function<void(Call&)>;

Outcome run(const Entry& e, const Spec& s, const Spoil& spoil, unsigned char fill = 0xff) {
  Call c(s, fill);
  spoil(c);
  const kgate_call k = c.call();
  Outcome o;
  o.status = e.fn(&k);
  o.message = c.message;
  o.untouched = c.outputs_untouched();
  return o;
}

std::string status_name(std::int32_t s) {
  return s == KGATE_OK ? "OK" : s == KGATE_REFUSED ? "REFUSED" : s == KGATE_ERROR ? "ERROR" : std::to_string(s);
}

struct BadCase {
  const char* what;
  Spec spec;
  Spoil spoil;
  std::int32_t status;
  const char* fragment;
};

Spec backward_fixed() {
  Spec s;
  s.backward = true;
  s.B = 2, s.T = 5, s.cu = {};
  return s;
}

Spec with(std::function<void(Spec&)> edit) {
  Spec s;
  edit(s);
  return s;
}

std::vector<BadCase> bad_cases() {
  const Spec packed;
  auto attr = [](const char* name) {
    return [name](Call& c) -> kgate_attr& {
      for (kgate_attr& a : c.attrs)
        if (std::string(a.name) == name) return a;
      throw std::logic_error(name);
    };
  };
  return {
      {"cu_seqlens missing", packed, [](Call& c) { c.in_dl.pop_back(); }, KGATE_ERROR,
       "glr: inputs: too few: cu_seqlens (inputs[6]) is missing"},
      {"k's head dim differs from q's", packed, [](Call& c) { c.in_t("k").shape[3] = 32; }, KGATE_ERROR,
       "glr: k: shape [1, 7, 1, 32] does not match q's [1, 7, 1, 64]"},
      {"an unknown attr", packed, [](Call& c) { c.attrs.push_back({"sclae", 1.0}); }, KGATE_ERROR,
       "glr: attrs: unknown attr \"sclae\""},
      {"scale missing", packed, [](Call& c) { c.attrs.erase(c.attrs.begin()); }, KGATE_ERROR,
       "glr: attrs.scale: missing"},
      {"scale NaN (differed: read as missing)", packed, [=](Call& c) { attr("scale")(c).value = NAN; }, KGATE_ERROR,
       "glr: scale: must be finite, got nan"},
      {"an attr given twice (differed: the last one won)", packed,
       [](Call& c) { c.attrs.push_back({"chunk", 16}); }, KGATE_ERROR, "glr: attrs: \"chunk\" given twice (attrs[7])"},
      {"gate 3", packed, [=](Call& c) { attr("gate")(c).value = 3; }, KGATE_ERROR, "glr: attrs.gate: must be 0"},
      {"chunk 1.5", packed, [=](Call& c) { attr("chunk")(c).value = 1.5; }, KGATE_ERROR,
       "glr: attrs.chunk: must be a positive integer"},
      {"delta 0 with beta given", packed, [=](Call& c) { attr("delta")(c).value = 0; }, KGATE_ERROR,
       "glr: inputs: too many: 7 given, this problem takes 6"},
      {"ht missing", packed, [](Call& c) { c.out_dl.pop_back(); }, KGATE_ERROR, "glr: outputs: too few: ht"},
      {"q int8 (differed: REFUSED by the kernels)", packed, [](Call& c) { c.in_t("q").dtype = {kDLInt, 8, 1}; },
       KGATE_ERROR, "glr: q: unsupported dtype"},
      {"cu_seqlens f32", packed, [](Call& c) { c.in_t("cu_seqlens").dtype = kF32; }, KGATE_ERROR,
       "glr: cu_seqlens: must be int32 or int64, got f32"},
      {"o overlapping itself (differed: REFUSED by the kernels)", packed,
       [](Call& c) { c.out_t("o").strides[2] = 0; }, KGATE_ERROR, "glr: strides.o: output elements overlap"},
      {"a negative stride (differed: REFUSED by the kernels)", packed, [](Call& c) { c.in_t("v").strides[1] = -128; },
       KGATE_ERROR, "glr: strides.v: negative stride -128"},
      {"B = 2 with cu_seqlens (differed: REFUSED by the kernels)", with([](Spec& s) { s.B = 2; }), [](Call&) {},
       KGATE_ERROR, "glr: B: must be 1 with cu_seqlens (packed sequences), got 2"},
      {"HV not a multiple of H (differed: REFUSED by the kernels)", with([](Spec& s) { s.H = 2, s.HV = 3; }),
       [](Call&) {}, KGATE_ERROR, "glr: HV: value heads HV = 3 must be a multiple of H = 2"},
      {"a tensor off the CPU", packed, [](Call& c) { c.in_t("h0").device.device_type = kDLCUDA; }, KGATE_REFUSED,
       "glr: h0: on device type 2; this library takes tensors on the CPU only"},
      {"tensors on two devices (differed: read as one)", packed, [](Call& c) { c.out_t("ht").device.device_id = 1; },
       KGATE_REFUSED, "glr: ht: on device 1, q on device 0; this library takes every tensor on one device"},
      {"another ABI version", packed, [](Call& c) { c.abi_version = KGATE_ABI_VERSION + 1; }, KGATE_REFUSED,
       "glr: caller ABI version"},
      {"backward: dht missing", backward_fixed(), [](Call& c) { c.in_dl.pop_back(); }, KGATE_ERROR,
       "glr: inputs: too few: dht (inputs[7]) is missing"},
      {"backward: dg of the wrong shape", backward_fixed(), [](Call& c) { c.out_t("dg").shape[2] = 1; }, KGATE_ERROR,
       "glr: dg: shape [2, 5, 1] does not match g's [2, 5, 2]"},
  };
}

// Every library that reads its calls through the binder: each bad call gets the case's status, one message
// line naming the argument, the same message from every library, and no output written.
TEST(GlrBinding, EveryLibraryAnswersABadCallAlike) {
  for (const BadCase& bc : bad_cases()) {
    std::vector<Entry> entries = cpu_entries(bc.spec.backward);
    for (Entry& e : emu_entries(bc.spec.backward)) entries.push_back(e);
    std::string first;
    for (const Entry& e : entries) {
      if (!e.fn) continue;
      const Outcome o = run(e, bc.spec, bc.spoil);
      SCOPED_TRACE(std::string(bc.what) + " via " + e.label + ": " + o.message);
      EXPECT_EQ(status_name(o.status), status_name(bc.status));
      EXPECT_EQ(o.message.rfind(bc.fragment, 0), 0u) << "wanted a message starting " << bc.fragment;
      EXPECT_EQ(o.message.find('\n'), std::string::npos) << "a message of more than one line";
      EXPECT_TRUE(o.untouched) << "an output was written";
      if (first.empty()) first = o.message;
      EXPECT_EQ(o.message, first) << "the libraries word the same bad call differently";
    }
  }
}

// The unspoiled calls run on every library (so the cases above fail for the reason they plant).
TEST(GlrBinding, TheValidCallsRunEverywhere) {
  for (const Spec& s : {Spec{}, backward_fixed()}) {
    std::vector<Entry> entries = cpu_entries(s.backward);
    for (Entry& e : emu_entries(s.backward)) entries.push_back(e);
    for (const Entry& e : entries) {
      if (!e.fn) continue;
      const Outcome o = run(e, s, [](Call&) {});
      EXPECT_EQ(status_name(o.status), "OK") << e.label << ": " << o.message;
      EXPECT_FALSE(o.untouched) << e.label << " wrote nothing";
    }
  }
}

// What the CPU algorithms take and the kernels do not: a valid call, run on the CPU, refused (one line
// naming the argument, nothing written) by the kernels.
TEST(GlrBinding, TheKernelsRefuseWhatOnlyTheCpuTakes) {
  if (!have_emulation()) GTEST_SKIP() << "the CUDA code is not built here (KGATE_CUDA off)";
  struct Narrower {
    const char* what;
    Spec spec;
    Spoil spoil;
    const char* fragment;
  };
  const Narrower cases[] = {
      {"chunk 16", with([](Spec& s) { s.chunk = 16; }), [](Call&) {},
       "glr: chunk: chunk size 16 is not supported on the GPU"},
      {"K = V = 32", with([](Spec& s) { s.K = s.V = 32; }), [](Call&) {},
       "glr: K: head dim 32 is not supported on the GPU"},
      {"f32 token tensors", with([](Spec& s) { s.token = kF32; }), [](Call&) {},
       "glr: q.dtype: fp32 is not supported"},
      {"cu_seqlens every other element", Spec{},
       [](Call& c) {
         Buffer& cu = c.in("cu_seqlens");
         std::vector<std::int32_t> spread = {0, -1, 3, -1, 3, -1, 7, -1};
         cu.bytes.resize(spread.size() * 4);
         std::memcpy(cu.bytes.data(), spread.data(), cu.bytes.size());
         cu.strides = {2};
         c.in_t("cu_seqlens").data = cu.bytes.data();
         c.in_t("cu_seqlens").strides = cu.strides.data();
       },
       "glr: cu_seqlens: device offsets must be contiguous, got stride 2"},
  };
  for (const Narrower& n : cases) {
    for (const Entry& e : cpu_entries(false)) {
      const Outcome o = run(e, n.spec, n.spoil);
      EXPECT_EQ(status_name(o.status), "OK") << n.what << " via " << e.label << ": " << o.message;
    }
    for (const Entry& e : emu_entries(false)) {
      const Outcome o = run(e, n.spec, n.spoil);
      SCOPED_TRACE(std::string(n.what) + " via " + e.label + ": " + o.message);
      EXPECT_EQ(status_name(o.status), "REFUSED");
      EXPECT_EQ(o.message.rfind(n.fragment, 0), 0u) << "wanted a message starting " << n.fragment;
      EXPECT_TRUE(o.untouched);
    }
  }
}

// Offsets that are no partition of T: an error on the CPU, which reads them; NaN in every output of the
// kernels, which read them on the device only after the call returned (glr/cuda/common/setup.hpp).
TEST(GlrBinding, InvalidOffsetsFailOnTheCpuAndPoisonTheKernelsOutputs) {
  const Spec s = with([](Spec& x) { x.cu = {0, 5, 3, 7}; });
  for (const Entry& e : cpu_entries(false)) {
    const Outcome o = run(e, s, [](Call&) {});
    EXPECT_EQ(status_name(o.status), "ERROR") << e.label;
    EXPECT_EQ(o.message, "glr: cu_seqlens: offsets must be non-decreasing: cu_seqlens[2] = 3 < cu_seqlens[1] = 5")
        << e.label;
    EXPECT_TRUE(o.untouched) << e.label;
  }
  if (!have_emulation()) GTEST_SKIP() << "the CUDA code is not built here (KGATE_CUDA off)";
  for (const Entry& e : emu_entries(false)) {
    Call c(s, 0x00);  // finite zeros, so a NaN comes from the call
    const kgate_call k = c.call();
    EXPECT_EQ(status_name(e.fn(&k)), "OK") << e.label << ": " << c.message;
    EXPECT_TRUE(c.outputs_all_nan()) << e.label;
  }
}

// bind() directly: the two offset modes give the same problem (only where the offsets' values go differs),
// and null strides and byte_offset read as DLPack defines them.
TEST(GlrBinding, BothOffsetModesBindTheSameProblem) {
  for (bool backward : {false, true}) {
    Spec s;
    s.backward = backward;
    const Pass pass = backward ? Pass::backward : Pass::forward;
    Call c(s);
    const kgate_call k = c.call();
    const Bound host = bind(k, pass, {kDLCPU, true}), device = bind(k, pass, {kDLCPU, false});
    EXPECT_EQ(host.p.cu_seqlens, (std::vector<std::int64_t>{0, 3, 3, 7}));
    EXPECT_TRUE(device.p.cu_seqlens.empty());
    EXPECT_EQ(host.num_seqs, 3);
    EXPECT_EQ(device.num_seqs, 3);
    EXPECT_EQ(device.cu_seqlens.data(), c.in_t("cu_seqlens").data);
    Params a = host.p, b = device.p;
    a.cu_seqlens.clear();
    EXPECT_EQ(std::memcmp(&a.strides, &b.strides, sizeof(Strides)), 0);
    EXPECT_EQ(attrs_of(a).size(), attrs_of(b).size());
    for (std::size_t i = 0; i < attrs_of(a).size(); ++i) {
      EXPECT_EQ(attrs_of(a)[i].value, attrs_of(b)[i].value) << attrs_of(a)[i].name;
    }
    EXPECT_EQ(std::vector<std::int64_t>({a.B, a.T, a.H, a.HV, a.K, a.V}),
              std::vector<std::int64_t>({b.B, b.T, b.H, b.HV, b.K, b.V}));
  }
}

TEST(GlrBinding, NullStridesAreRowMajorAndByteOffsetIsHonoured) {
  Spec s;
  s.cu = {};
  s.B = 2;
  Call c(s);
  for (DLTensor& t : c.in_dl) t.strides = nullptr;
  for (DLTensor& t : c.out_dl) t.strides = nullptr;
  c.in_t("q").byte_offset = 6;  // bind() reads no token data: where the first element is, is all it says
  const Bound b = bind(c.call(), Pass::forward);
  Params dense = b.p;
  dense.set_contiguous_strides();
  const Strides &got = b.p.strides, &want = dense.strides;  // the forward's tensors (the others stay 0)
  auto same = [](const auto& x, const auto& y) { return std::memcmp(&x, &y, sizeof(x)) == 0; };
  EXPECT_TRUE(same(got.q, want.q) && same(got.k, want.k) && same(got.v, want.v) && same(got.o, want.o));
  EXPECT_TRUE(same(got.g, want.g) && same(got.beta, want.beta) && same(got.h0, want.h0) && same(got.ht, want.ht));
  EXPECT_EQ(got.q.token, s.H * s.K);
  EXPECT_EQ(b.q.data(), static_cast<char*>(c.in_t("q").data) + 6);
}

TEST(GlrBinding, BindThrowsBadCallOrRefusal) {
  Spec s;
  {
    Call c(s);
    c.in_t("k").shape[3] = 32;
    EXPECT_THROW(bind(c.call(), Pass::forward), BadCall);
  }
  {
    Call c(s);
    c.in_t("k").device.device_type = kDLCUDA;
    EXPECT_THROW(bind(c.call(), Pass::forward), Refusal);
  }
  {
    Call c(s);  // the kernels' own limits are not the binder's
    c.attrs[1].value = 16;
    EXPECT_NO_THROW(bind(c.call(), Pass::forward, {kDLCPU, false}));
  }
}

// The one status map of every entry point.
TEST(GlrBinding, GuardedEntryMapsWhatItCatches) {
  char msg[16];
  kgate_call k{};
  k.message = msg;
  k.message_capacity = sizeof(msg);
  const InvalidArgument invalid("K", "head dim 32 is not supported on the GPU");
  for (std::int32_t when_invalid : {KGATE_ERROR, KGATE_REFUSED}) {
    EXPECT_EQ(guarded_entry(&k, when_invalid, [] {}), KGATE_OK);
    EXPECT_EQ(guarded_entry(&k, when_invalid, [&] { throw BadCall(invalid); }), KGATE_ERROR);
    EXPECT_EQ(std::string(msg), std::string(invalid.what()).substr(0, sizeof(msg) - 1));  // truncated, NUL kept
    EXPECT_EQ(guarded_entry(&k, when_invalid, [&] { throw invalid; }), when_invalid);
    EXPECT_EQ(guarded_entry(&k, when_invalid, [] { throw Refusal("x"); }), KGATE_REFUSED);
    EXPECT_EQ(std::string(msg), "glr: x");
    EXPECT_EQ(guarded_entry(&k, when_invalid, [] { throw std::runtime_error("y"); }), KGATE_ERROR);
    EXPECT_EQ(guarded_entry(&k, when_invalid, [] { throw 1; }), KGATE_ERROR);
    EXPECT_EQ(guarded_entry(nullptr, when_invalid, [] {}), KGATE_ERROR);
  }
}

}  // namespace
}  // namespace glr::kgate_export
