// tests/glrcuda/device.hpp: a Case's tensors on the GPU, byte for byte as the host layout has them
// (padding and the offset-by-one first element included), and the calls the GPU tests make.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "case.hpp"

namespace glr::cudatest {

inline void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Whether a usable CUDA device is present (the gpu tests skip otherwise).
inline bool have_gpu() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return n > 0;
}

struct DeviceBuffer {
  void* ptr = nullptr;
  std::size_t bytes = 0;
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) : bytes(n) { cuda_ok(cudaMalloc(&ptr, n ? n : 1), "cudaMalloc"); }
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// A HostTensor mirrored on the device.
struct DeviceTensor {
  const HostTensor* host = nullptr;
  std::unique_ptr<DeviceBuffer> buf;
  void* data() const {
    return host->empty() ? nullptr
                         : static_cast<char*>(buf->ptr) + (static_cast<const char*>(host->data()) -
                                                           reinterpret_cast<const char*>(host->storage.data()));
  }
  void upload(cudaStream_t s) {
    if (host->empty()) return;
    buf = std::make_unique<DeviceBuffer>(host->bytes());
    cuda_ok(cudaMemcpyAsync(buf->ptr, host->storage.data(), host->bytes(), cudaMemcpyHostToDevice, s), "upload");
  }
  void download(HostTensor& into, cudaStream_t s) const {
    if (into.empty()) return;
    cuda_ok(cudaMemcpyAsync(into.storage.data(), buf->ptr, into.bytes(), cudaMemcpyDeviceToHost, s), "download");
  }
};

// Every tensor of a call on the device; inputs and poisoned outputs uploaded on construction.
struct DeviceCall {
  CallTensors host;
  DeviceTensor q, k, v, g, beta, h0, dout, dht, o, ht, dq, dk, dv, dg, dbeta, dh0;
  std::unique_ptr<DeviceBuffer> cu;
  cuda::DeviceOffsets offsets;

  DeviceCall(const Case& c, cudaStream_t s) : host(make_call(c)) {
    DeviceTensor* all[] = {&q, &k, &v, &g, &beta, &h0, &dout, &dht, &o, &ht, &dq, &dk, &dv, &dg, &dbeta, &dh0};
    const HostTensor* src[] = {&host.q,    &host.k,  &host.v,  &host.g,  &host.beta,  &host.h0,
                               &host.dout, &host.dht, &host.o, &host.ht, &host.dq,    &host.dk,
                               &host.dv,   &host.dg, &host.dbeta, &host.dh0};
    for (std::size_t i = 0; i < 16; ++i) {
      all[i]->host = src[i];
      all[i]->upload(s);
    }
    if (c.call.varlen()) {
      const auto& cs = c.call.cu_seqlens;
      cu = std::make_unique<DeviceBuffer>(cs.size() * sizeof(std::int64_t));
      cuda_ok(cudaMemcpyAsync(cu->ptr, cs.data(), cs.size() * sizeof(std::int64_t), cudaMemcpyHostToDevice, s),
              "upload cu_seqlens");
      offsets.cu_seqlens = static_cast<const std::int64_t*>(cu->ptr);
    }
  }
  static cuda::In in(const DeviceTensor& t) { return t.host->empty() ? cuda::In{} : cuda::In{t.data(), t.host->dt}; }
  static cuda::Out out(const DeviceTensor& t) {
    return t.host->empty() ? cuda::Out{} : cuda::Out{t.data(), t.host->dt};
  }
  cuda::ForwardTensors forward() const { return {in(q), in(k), in(v), in(g), in(beta), in(h0), out(o), out(ht)}; }
  cuda::BackwardTensors backward() const {
    return {in(q),    in(k),   in(v),   in(g),   in(beta),  in(h0),  in(dout),
            in(dht),  out(dq), out(dk), out(dv), out(dg),   out(dbeta), out(dh0)};
  }
  // Outputs back into host.* (synchronises s).
  void download(bool backward, cudaStream_t s) {
    if (!backward) {
      o.download(host.o, s);
      ht.download(host.ht, s);
    } else {
      dq.download(host.dq, s);
      dk.download(host.dk, s);
      dv.download(host.dv, s);
      dg.download(host.dg, s);
      dbeta.download(host.dbeta, s);
      dh0.download(host.dh0, s);
    }
    cuda_ok(cudaStreamSynchronize(s), "download");
  }
  // The raw bytes of every output of a pass (for the determinism check).
  std::vector<double> output_bytes(bool backward) const {
    std::vector<double> r;
    const HostTensor* f[] = {&host.o, &host.ht};
    const HostTensor* b[] = {&host.dq, &host.dk, &host.dv, &host.dg, &host.dbeta, &host.dh0};
    auto add = [&](const HostTensor* h) {
      if (!h->empty()) r.insert(r.end(), h->storage.begin(), h->storage.end());
    };
    if (!backward)
      for (auto* h : f) add(h);
    else
      for (auto* h : b) add(h);
    return r;
  }
};

}  // namespace glr::cudatest
