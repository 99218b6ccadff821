// tests/glrcuda/kgate_call.hpp: a Case's device tensors as a kgate_call (include/kgate/abi.h), in the
// order and with the attrs of glr/kgate/binding.hpp, and the kgate entry libraries loaded with dlopen.
#pragma once

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "binding.hpp"
#include "device.hpp"
#include "kgate/abi.h"

namespace glr::cudatest {

// Finds a library: $GLRCUDA_LIB_DIR, then ../lib beside the test binary (the carried bundle), then the
// build tree this test was built in.
inline std::string find_library(const std::string& name) {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("GLRCUDA_LIB_DIR")) dirs.push_back(env);
  char self[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    std::string exe(self, static_cast<std::size_t>(n));
    dirs.push_back(exe.substr(0, exe.rfind('/')) + "/../lib");
  }
#ifdef GLRCUDA_BUILD_LIB_DIR
  dirs.push_back(GLRCUDA_BUILD_LIB_DIR);
#endif
  for (const std::string& d : dirs)
    if (access((d + "/" + name).c_str(), R_OK) == 0) return d + "/" + name;
  return "";
}

class KgateCall {
 public:
  KgateCall(const Case& c, const DeviceCall& d, bool backward) {
    const Params& p = c.dense;
    const DLDevice dev{kDLCUDA, 0};
    auto add = [&](std::vector<Owned>& list, const DeviceTensor& t) {
      if (t.host->empty()) return;
      Owned o;
      o.shape = t.host->shape;
      o.strides = t.host->strides;
      o.t.data = t.data();
      o.t.device = dev;
      o.t.ndim = static_cast<int>(o.shape.size());
      o.t.dtype = dl_type(t.host->dt);
      list.push_back(std::move(o));
    };
    add(in_, d.q);
    add(in_, d.k);
    add(in_, d.v);
    add(in_, d.g);
    add(in_, d.beta);
    add(in_, d.h0);
    if (backward) {
      add(in_, d.dout);
      add(in_, d.dht);
    }
    if (d.cu) {
      Owned o;
      o.shape = {static_cast<std::int64_t>(c.call.cu_seqlens.size())};
      o.strides = {1};
      o.t.data = d.cu->ptr;
      o.t.device = dev;
      o.t.ndim = 1;
      o.t.dtype = {kDLInt, 64, 1};
      in_.push_back(std::move(o));
    }
    if (!backward) {
      add(out_, d.o);
      add(out_, d.ht);
    } else {
      for (const DeviceTensor* t : {&d.dq, &d.dk, &d.dv, &d.dg, &d.dbeta, &d.dh0}) add(out_, *t);
    }
    for (auto* list : {&in_, &out_})
      for (Owned& o : *list) {
        o.t.shape = o.shape.data();
        o.t.strides = o.strides.data();
      }
    for (const Owned& o : in_) ins_.push_back(o.t);
    for (const Owned& o : out_) outs_.push_back(o.t);
    attrs_ = kgate_export::attrs_of(p);
  }

  kgate_call call(void* stream) {
    kgate_call k{};
    k.abi_version = KGATE_ABI_VERSION;
    k.n_inputs = static_cast<std::int32_t>(ins_.size());
    k.n_outputs = static_cast<std::int32_t>(outs_.size());
    k.n_attrs = static_cast<std::int32_t>(attrs_.size());
    k.inputs = ins_.data();
    k.outputs = outs_.data();
    k.attrs = attrs_.data();
    k.stream = stream;
    k.message = message_;
    k.message_capacity = sizeof(message_);
    return k;
  }
  const char* message() const { return message_; }

 private:
  struct Owned {
    DLTensor t{};
    std::vector<std::int64_t> shape, strides;
  };
  static DLDataType dl_type(DType t) {
    switch (t) {
      case DType::bf16: return {kDLBfloat, 16, 1};
      case DType::f16: return {kDLFloat, 16, 1};
      case DType::f32: return {kDLFloat, 32, 1};
      case DType::f64: return {kDLFloat, 64, 1};
    }
    return {kDLFloat, 32, 1};
  }
  std::vector<Owned> in_, out_;
  std::vector<DLTensor> ins_, outs_;
  std::vector<kgate_attr> attrs_;
  char message_[512] = {};
};

}  // namespace glr::cudatest
