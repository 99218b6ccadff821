// The CUDA backend's own promises, each against an entry point that behaves in one known way: guards catch
// a one-byte overrun on each side, poison reaches every element (strided too) and nothing else, staged inputs
// really arrive late for work on the legacy stream, outputs are captured before a stray stream finishes,
// invocations run in flight together, and a CUDA error ends a call as a crash. Skips without a GPU.
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cuda/cuda_backend.hpp"
#include "kgate/rng.hpp"
#include "test_entries.hpp"

namespace kgate {
namespace {

constexpr std::size_t kGuard = 64 * 1024;

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda_device_available(&why)) GTEST_SKIP() << "no GPU here, CUDA backend tests skipped: " << why;
    TargetOptions o;
    o.guard_seed = 1234;
    o.guard_bytes = kGuard;
    backend = make_cuda_backend(o);
  }

  // A buffer holding `values` as f32.
  BufferId floats(const std::vector<float>& values) {
    const BufferId id = backend->alloc(values.size() * 4);
    backend->write(id, 0, std::as_bytes(std::span<const float>(values)));
    return id;
  }
  std::vector<float> read_floats(BufferId id, std::size_t n) {
    const std::vector<std::byte> b = backend->read(id, 0, n * 4);
    std::vector<float> out(n);
    std::memcpy(out.data(), b.data(), b.size());
    return out;
  }
  static TensorArg dense(BufferId id, std::int64_t n) { return {id, Layout::dense(DType::f32, {n})}; }

  // One invocation y = f(x) over n floats, x = 0, 1, 2, ...
  Invocation copy_invocation(std::int64_t n, float base = 0.0f) {
    std::vector<float> x(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) x[static_cast<std::size_t>(i)] = base + static_cast<float>(i);
    Invocation inv;
    inv.inputs = {dense(floats(x), n)};
    inv.outputs = {dense(backend->alloc(static_cast<std::size_t>(n) * 4), n)};
    return inv;
  }

  CallResult call(const Invocation& inv, StreamMode mode, EntryFn fn, std::vector<std::byte> poison = {}) {
    CallRequest r;
    r.invocations = {inv};
    r.stream = mode;
    r.poison = std::move(poison);
    return backend->invoke(r, fn);
  }

  static std::vector<std::byte> poison_ff() { return std::vector<std::byte>(4, std::byte{0xff}); }
  static std::uint8_t guard_byte(BufferId id, std::size_t i) {
    return static_cast<std::uint8_t>(Stream(1234).child(id).bits(i) & 0xff);
  }
  static std::uint32_t bits_of(const HostArray& a, std::int64_t i) { return static_cast<std::uint32_t>(a.bits(i)); }

  std::unique_ptr<DeviceBackend> backend;
};

TEST_F(CudaBackendTest, CleanCallCopiesAndLeavesGuardsIntact) {
  const Invocation inv = copy_invocation(1000);
  const CallResult r = call(inv, StreamMode::own_stream, gputest::copy_on_stream, poison_ff());
  ASSERT_EQ(r.outcome, CallOutcome::completed) << r.detail;
  ASSERT_EQ(r.results.size(), 1u);
  EXPECT_EQ(r.results[0].status, KGATE_OK) << r.results[0].message;
  EXPECT_TRUE(r.guards.empty());
  const HostArray& y = r.results[0].outputs[0];
  for (std::int64_t i = 0; i < 1000; ++i) ASSERT_EQ(y.get(i), static_cast<double>(i)) << "element " << i;
  EXPECT_TRUE(backend->check_guards(inv.inputs[0].buffer).empty());
}

TEST_F(CudaBackendTest, GuardCatchesOneByteBeforeThePayload) {
  const Invocation inv = copy_invocation(100);
  const BufferId out = inv.outputs[0].buffer;
  Invocation w = inv;
  w.attrs = {{"byte", static_cast<double>(guard_byte(out, kGuard - 1) ^ 0xff)}};
  const CallResult r = call(w, StreamMode::own_stream, gputest::write_before);
  ASSERT_EQ(r.outcome, CallOutcome::completed) << r.detail;
  ASSERT_EQ(r.guards.size(), 1u);
  EXPECT_EQ(r.guards[0].buffer, out);
  EXPECT_EQ(r.guards[0].offset, -1);
  EXPECT_EQ(r.guards[0].expected, guard_byte(out, kGuard - 1));
  EXPECT_EQ(r.guards[0].found, guard_byte(out, kGuard - 1) ^ 0xff);
  ASSERT_EQ(backend->check_guards(out).size(), 1u);
}

TEST_F(CudaBackendTest, GuardCatchesOneBytePastTheEnd) {
  const Invocation inv = copy_invocation(100);
  const BufferId out = inv.outputs[0].buffer;
  Invocation w = inv;
  w.attrs = {{"byte", static_cast<double>(guard_byte(out, kGuard) ^ 0x01)}};
  const CallResult r = call(w, StreamMode::own_stream, gputest::write_after);
  ASSERT_EQ(r.outcome, CallOutcome::completed) << r.detail;
  ASSERT_EQ(r.guards.size(), 1u);
  EXPECT_EQ(r.guards[0].buffer, out);
  EXPECT_EQ(r.guards[0].offset, 400);  // 100 floats: the byte just after the payload
  EXPECT_EQ(r.guards[0].expected, guard_byte(out, kGuard));
  EXPECT_EQ(r.guards[0].found, guard_byte(out, kGuard) ^ 0x01);
}

TEST_F(CudaBackendTest, WriteAndReadRoundTripLargerThanStagingAtOddOffsets) {
  const std::size_t n = (std::size_t{40} << 20) + 7;  // past the 32 MiB staging, not a multiple of anything
  std::vector<std::byte> data(n);
  for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<std::byte>((i * 131) ^ (i >> 13));
  const BufferId id = backend->alloc(n + 3);
  backend->write(id, 3, data);
  EXPECT_EQ(backend->read(id, 3, n), data);
  EXPECT_TRUE(backend->check_guards(id).empty());
  EXPECT_THROW(backend->write(id, 4, data), TargetError);
  EXPECT_THROW(backend->read(id, 0, n + 4), TargetError);
  EXPECT_THROW(backend->read(id + 1000, 0, 1), TargetError);
}

TEST_F(CudaBackendTest, PoisonFillsEveryElementOfAStridedOutputAndNothingElse) {
  // A 5 x 7 output at element offset 3 with row stride 17 and column stride 2, in a buffer pre-filled with 0x11.
  const std::int64_t rows = 5, cols = 7, storage = 3 + 4 * 17 + 6 * 2 + 1;
  const BufferId id = backend->alloc(static_cast<std::size_t>(storage) * 4);
  backend->write(id, 0, std::vector<std::byte>(static_cast<std::size_t>(storage) * 4, std::byte{0x11}));
  Layout l;
  l.dtype = DType::f32;
  l.shape = {rows, cols};
  l.strides = {17, 2};
  l.offset = 3;
  Invocation inv;
  inv.outputs = {{id, l}};
  const std::vector<std::byte> poison{std::byte{0xde}, std::byte{0xad}, std::byte{0xbe}, std::byte{0xef}};
  const CallResult r = call(inv, StreamMode::own_stream, gputest::write_nothing, poison);
  ASSERT_EQ(r.outcome, CallOutcome::completed) << r.detail;
  const HostArray& y = r.results[0].outputs[0];
  for (std::int64_t i = 0; i < rows * cols; ++i) ASSERT_EQ(bits_of(y, i), 0xefbeaddeu) << "element " << i;
  const std::vector<std::byte> all = backend->read(id, 0, static_cast<std::size_t>(storage) * 4);
  std::vector<bool> element(static_cast<std::size_t>(storage), false);
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) element[static_cast<std::size_t>(3 + i * 17 + j * 2)] = true;
  for (std::int64_t e = 0; e < storage; ++e)
    for (int b = 0; b < 4; ++b) {
      const auto got = static_cast<unsigned>(all[static_cast<std::size_t>(e * 4 + b)]);
      const unsigned want = element[static_cast<std::size_t>(e)] ? static_cast<unsigned>(poison[b]) : 0x11u;
      ASSERT_EQ(got, want) << "byte " << b << " of storage element " << e;
    }
}

TEST_F(CudaBackendTest, StreamModesPassTheStreamTheyPromise) {
  const Invocation inv = copy_invocation(4);
  EXPECT_EQ(call(inv, StreamMode::own_stream, gputest::report_stream).results[0].message, "nonblocking");
  EXPECT_EQ(call(inv, StreamMode::staged_inputs, gputest::report_stream).results[0].message, "nonblocking");
  EXPECT_EQ(call(inv, StreamMode::null_stream, gputest::report_stream).results[0].message, "null");
}

TEST_F(CudaBackendTest, StagedInputsArriveOnTheCallersStreamOnly) {
  const Invocation inv = copy_invocation(4096, 1.0f);
  // On the caller's stream the kernel sees the real inputs...
  const CallResult good = call(inv, StreamMode::staged_inputs, gputest::copy_on_stream, poison_ff());
  ASSERT_EQ(good.outcome, CallOutcome::completed) << good.detail;
  EXPECT_TRUE(good.detail.empty()) << good.detail;  // released by the host, not by the time limit
  for (std::int64_t i = 0; i < 4096; ++i) ASSERT_EQ(good.results[0].outputs[0].get(i), 1.0 + i) << "element " << i;
  // ...on the legacy stream it runs at once, on the garbage the inputs hold until the staged kernel ends.
  const CallResult bad = call(inv, StreamMode::staged_inputs, gputest::copy_on_legacy);
  ASSERT_EQ(bad.outcome, CallOutcome::completed) << bad.detail;
  for (std::int64_t i = 0; i < 4096; ++i) ASSERT_EQ(bits_of(bad.results[0].outputs[0], i), 0xffffffffu) << "element " << i;
  // The inputs hold their real values again afterwards.
  const std::vector<float> x = read_floats(inv.inputs[0].buffer, 4096);
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], 1.0f + static_cast<float>(i)) << "input element " << i;
  // Outside staged mode the same legacy-stream kernel reads real inputs (written before the call).
  const CallResult plain = call(inv, StreamMode::null_stream, gputest::copy_on_legacy);
  ASSERT_EQ(plain.outcome, CallOutcome::completed) << plain.detail;
  EXPECT_EQ(plain.results[0].outputs[0].get(4095), 4096.0);
}

TEST_F(CudaBackendTest, OutputsAreCapturedBeforeAStrayStreamFinishes) {
  const Invocation inv = copy_invocation(256, 5.0f);
  const CallResult r = call(inv, StreamMode::own_stream, gputest::copy_on_stray, poison_ff());
  ASSERT_EQ(r.outcome, CallOutcome::completed) << r.detail;
  for (std::int64_t i = 0; i < 256; ++i) ASSERT_EQ(bits_of(r.results[0].outputs[0], i), 0xffffffffu) << "element " << i;
  // The backend waited for the stray work before returning, so the buffer holds its result now.
  const std::vector<float> y = read_floats(inv.outputs[0].buffer, 256);
  EXPECT_EQ(y[0], 5.0f);
  EXPECT_EQ(y[255], 260.0f);
}

TEST_F(CudaBackendTest, TwoInvocationsRunInFlightAtOnce) {
  int round = 1;
  for (StreamMode mode : {StreamMode::own_stream, StreamMode::staged_inputs}) {
    Invocation a = copy_invocation(1), b = copy_invocation(1);
    a.attrs = {{"slot", 0}, {"round", round}};
    b.attrs = {{"slot", 1}, {"round", round}};
    ++round;
    CallRequest r;
    r.invocations = {a, b};
    r.stream = mode;
    const CallResult res = backend->invoke(r, gputest::rendezvous);
    ASSERT_EQ(res.outcome, CallOutcome::completed) << res.detail;
    ASSERT_EQ(res.results.size(), 2u);
    EXPECT_EQ(res.results[0].outputs[0].get(0), 1.0) << "invocation 0 never saw invocation 1 running";
    EXPECT_EQ(res.results[1].outputs[0].get(0), 1.0) << "invocation 1 never saw invocation 0 running";
    EXPECT_LT(res.seconds, 1.0) << "the two invocations waited for each other's timeout: not concurrent";
  }
}

TEST_F(CudaBackendTest, StagedConcurrentCallsEachGetTheirOwnInputs) {
  const Invocation a = copy_invocation(3000, 0.0f), b = copy_invocation(3000, 100000.0f);
  CallRequest r;
  r.invocations = {a, b};
  r.stream = StreamMode::staged_inputs;
  r.poison = poison_ff();
  const CallResult res = backend->invoke(r, gputest::copy_on_stream);
  ASSERT_EQ(res.outcome, CallOutcome::completed) << res.detail;
  for (std::int64_t i = 0; i < 3000; i += 7) {
    ASSERT_EQ(res.results[0].outputs[0].get(i), static_cast<double>(i));
    ASSERT_EQ(res.results[1].outputs[0].get(i), 100000.0 + i);
  }
}

TEST_F(CudaBackendTest, ALaunchErrorCrashesTheCallButNotTheBackend) {
  const Invocation inv = copy_invocation(16);
  const CallResult r = call(inv, StreamMode::own_stream, gputest::bad_launch);
  EXPECT_EQ(r.outcome, CallOutcome::crashed);
  // 4096 threads a block: CUDA 13 on the H200 machine reports cudaErrorInvalidValue where older toolkits
  // said cudaErrorInvalidConfiguration; either names the launch error.
  EXPECT_TRUE(r.detail.find("cudaErrorInvalidConfiguration") != std::string::npos ||
              r.detail.find("cudaErrorInvalidValue") != std::string::npos)
      << r.detail;
  const CallResult again = call(inv, StreamMode::own_stream, gputest::copy_on_stream);
  ASSERT_EQ(again.outcome, CallOutcome::completed) << again.detail;
  EXPECT_EQ(again.results[0].outputs[0].get(15), 15.0);
}

TEST_F(CudaBackendTest, InvalidRequestsThrowBeforeAnyDeviceWork) {
  Invocation inv = copy_invocation(16);
  inv.outputs[0].layout = Layout::dense(DType::f32, {17});  // one element past the buffer
  EXPECT_THROW(call(inv, StreamMode::own_stream, gputest::copy_on_stream), TargetError);
  inv.outputs[0].buffer = 999999;
  EXPECT_THROW(call(inv, StreamMode::own_stream, gputest::copy_on_stream), TargetError);
}

}  // namespace
}  // namespace kgate
