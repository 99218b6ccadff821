// The CUDA path's kgate entry on the host, loaded with dlopen as kgate loads it: glr_cuda_emu_kgate_* (the
// kernels' emulation behind kgate_run, the same glr/cuda/abi code as the GPU libraries) gives the bits of
// cuda::emulate_* on the same tensors, strided and packed calls included; a bad call fails (KGATE_ERROR)
// and a valid one outside the kernels' sizes is refused (KGATE_REFUSED), each with a message naming the
// argument, outputs untouched. glr/cuda/abi reads its calls
// through the binder the CPU libraries use (glr/kgate/binding.hpp), so this and
// tests/glr/kgate_export_test.cpp cover both of its callers without a GPU.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "binding.hpp"
#include "case.hpp"
#include "kgate/abi.h"
#include "shapes.hpp"

namespace glr::cudatest {
namespace {

struct Library {
  void* handle = nullptr;
  kgate_entry_fn entry = nullptr;
  kgate_device_fn device = nullptr;
  Library(const char* path, const char* symbol) {
    handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) return;
    entry = reinterpret_cast<kgate_entry_fn>(dlsym(handle, symbol));
    device = reinterpret_cast<kgate_device_fn>(dlsym(handle, "kgate_device"));
  }
  ~Library() {
    if (handle) dlclose(handle);
  }
};

Library& emu(bool backward) {
  static Library fwd(GLRCUDA_EMU_FWD, "kgate_run"), bwd(GLRCUDA_EMU_BWD, "kgate_run");
  return backward ? bwd : fwd;
}

DLDataType dl_type(DType t) {
  switch (t) {
    case DType::bf16: return {kDLBfloat, 16, 1};
    case DType::f16: return {kDLFloat, 16, 1};
    case DType::f32: return {kDLFloat, 32, 1};
    case DType::f64: return {kDLFloat, 64, 1};
  }
  return {kDLFloat, 32, 1};
}

// A CallTensors' host tensors as a kgate_call, in glr/kgate/binding.hpp's order, with the attrs of the
// problem; cu_seqlens as int32.
class HostCall {
 public:
  HostCall(const Case& c, CallTensors& t, bool backward) : offsets_(c.call.cu_seqlens.begin(), c.call.cu_seqlens.end()) {
    auto add = [](std::vector<DLTensor>& list, HostTensor& h) {
      if (h.empty()) return;
      DLTensor d{};
      d.data = h.data();
      d.device = {kDLCPU, 0};
      d.ndim = static_cast<int>(h.shape.size());
      d.dtype = dl_type(h.dt);
      d.shape = h.shape.data();
      d.strides = h.strides.data();
      list.push_back(d);
    };
    for (HostTensor* h : {&t.q, &t.k, &t.v, &t.g, &t.beta, &t.h0}) add(in_, *h);
    if (backward) add(in_, t.dout), add(in_, t.dht);
    if (!offsets_.empty()) {
      cu_shape_ = static_cast<std::int64_t>(offsets_.size());
      DLTensor d{};
      d.data = offsets_.data();
      d.device = {kDLCPU, 0};
      d.ndim = 1;
      d.dtype = {kDLInt, 32, 1};
      d.shape = &cu_shape_;
      d.strides = &one_;
      in_.push_back(d);
    }
    if (!backward)
      for (HostTensor* h : {&t.o, &t.ht}) add(out_, *h);
    else
      for (HostTensor* h : {&t.dq, &t.dk, &t.dv, &t.dg, &t.dbeta, &t.dh0}) add(out_, *h);
    const Params& p = c.call;
    attrs_ = kgate_export::attrs_of(p);
  }
  HostCall(const HostCall&) = delete;
  HostCall& operator=(const HostCall&) = delete;

  kgate_call call() {
    kgate_call k{};
    k.abi_version = KGATE_ABI_VERSION;
    k.n_inputs = static_cast<std::int32_t>(in_.size());
    k.n_outputs = static_cast<std::int32_t>(out_.size());
    k.n_attrs = static_cast<std::int32_t>(attrs_.size());
    k.inputs = in_.data();
    k.outputs = out_.data();
    k.attrs = attrs_.data();
    k.message = message_;
    k.message_capacity = sizeof(message_);
    return k;
  }
  std::vector<DLTensor>& inputs() { return in_; }
  std::vector<kgate_attr>& attrs() { return attrs_; }
  const char* message() const { return message_; }

 private:
  std::vector<std::int32_t> offsets_;
  std::int64_t cu_shape_ = 0, one_ = 1;
  std::vector<DLTensor> in_, out_;
  std::vector<kgate_attr> attrs_;
  char message_[512] = {};
};

constexpr cuda::EmuOptions kGpuRules{false, false, false};

// Every output of a call still all-0xff (as make_call poisons them): nothing was written.
bool untouched(const CallTensors& t) {
  for (const HostTensor* h : {&t.o, &t.ht, &t.dq, &t.dk, &t.dv, &t.dg, &t.dbeta, &t.dh0})
    for (std::size_t i = 0; i < h->bytes(); ++i)
      if (reinterpret_cast<const unsigned char*>(h->storage.data())[i] != 0xff) return false;
  return true;
}

TEST(GlrCudaAbi, LibrariesLoadOnTheCpu) {
  for (bool backward : {false, true}) {
    Library& lib = emu(backward);
    ASSERT_NE(lib.handle, nullptr) << dlerror();
    ASSERT_NE(lib.entry, nullptr);
    ASSERT_NE(lib.device, nullptr);
    EXPECT_EQ(lib.device(), kDLCPU);
  }
}

// kgate_run of the emulation library is cuda::emulate_* with the GPU's dtype rules, bit for bit.
TEST(GlrCudaAbi, EmulationEntryIsTheEmulator) {
  const std::vector<Shape> shapes = emulation_shapes();
  struct Run {
    Member m;
    const Shape& s;
    Layout layout;
  };
  for (const Run& r : {Run{Member::gated_deltanet, shapes[2], {}}, Run{Member::retnet, shapes[1], {true, false}},
                       Run{Member::linear_attention, shapes[3], {}}})
    for (bool backward : {false, true}) {
      const Case c = make_case(r.m, r.s, {}, r.layout, test_seed(41));
      CallTensors via_abi = make_call(c), direct = make_call(c);
      HostCall hc(c, via_abi, backward);
      kgate_call k = hc.call();
      ASSERT_EQ(emu(backward).entry(&k), KGATE_OK) << hc.message() << " " << c.describe();
      if (backward)
        cuda::emulate_backward<float>(c.call, direct.backward(), kGpuRules);
      else
        cuda::emulate_forward<float>(c.call, direct.forward(), kGpuRules);
      EXPECT_EQ(diff_results(via_abi.read(backward), direct.read(backward)), "") << c.describe();
    }
}

// A call that is no glr problem: KGATE_ERROR, as from the CPU libraries (the one binder rejects it); a
// valid call outside what the kernels take: KGATE_REFUSED. Either way a message naming the argument and no
// output written. tests/glr_binding compares the two libraries call by call.
TEST(GlrCudaAbi, BadCallsFailUnsupportedOnesAreRefusedAndNeitherWrites) {
  const Case c = make_case(Member::gated_deltanet, emulation_shapes()[2], {}, {}, test_seed(43));
  auto expect_status = [&](std::int32_t want, auto&& spoil, const std::string& fragment) {
    CallTensors t = make_call(c);
    HostCall hc(c, t, false);
    spoil(hc);
    kgate_call k = hc.call();
    EXPECT_EQ(emu(false).entry(&k), want) << hc.message();
    EXPECT_NE(std::string(hc.message()).find(fragment), std::string::npos) << hc.message();
    EXPECT_TRUE(untouched(t)) << "an output was written by a failed call: " << fragment;
  };
  expect_status(KGATE_ERROR, [](HostCall& h) { h.inputs().pop_back(); }, "cu_seqlens");
  expect_status(KGATE_ERROR, [](HostCall& h) { h.inputs()[1].shape[3] = 32; }, "k: shape");
  expect_status(KGATE_REFUSED, [](HostCall& h) { h.inputs()[0].device.device_type = kDLCUDA; }, "CPU only");
  expect_status(KGATE_ERROR, [](HostCall& h) { h.attrs().push_back({"sclae", 1.0}); }, "unknown attr \"sclae\"");
  expect_status(KGATE_ERROR, [](HostCall& h) { h.attrs().erase(h.attrs().begin()); }, "attrs.scale");
  expect_status(KGATE_ERROR, [](HostCall& h) { h.inputs()[0].dtype = {kDLInt, 8, 1}; }, "q: unsupported dtype");
  // Valid for the CPU algorithms, outside what the kernels take: refused by the kernels' own checks.
  expect_status(KGATE_REFUSED, [](HostCall& h) { h.attrs()[1].value = 16; }, "chunk");
}

}  // namespace
}  // namespace glr::cudatest
