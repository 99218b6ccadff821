// A sticky CUDA error (an illegal address in the callee's kernel) ends the call as a crash naming the error,
// and the backend refuses everything afterwards, because the context is gone. Its own executable: after a
// sticky error no CUDA call in this process can succeed again, so it must not share one with other tests.
#include <string>

#include <gtest/gtest.h>

#include "backend/cuda/cuda_backend.hpp"
#include "test_entries.hpp"

namespace kgate {
namespace {

TEST(CudaStickyError, BecomesACrashAndPoisonsTheBackend) {
  std::string why;
  if (!cuda_device_available(&why)) GTEST_SKIP() << "no GPU here, CUDA sticky-error test skipped: " << why;
  std::unique_ptr<DeviceBackend> backend = make_cuda_backend(TargetOptions{});
  Invocation inv;
  inv.outputs = {{backend->alloc(64), Layout::dense(DType::f32, {16})}};
  CallRequest r;
  r.invocations = {inv};
  const CallResult res = backend->invoke(r, gputest::illegal_address);
  EXPECT_EQ(res.outcome, CallOutcome::crashed);
  EXPECT_NE(res.detail.find("cudaErrorIllegalAddress"), std::string::npos) << res.detail;
  EXPECT_NE(res.detail.find("illegal memory access"), std::string::npos) << res.detail;
  try {
    backend->alloc(64);
    ADD_FAILURE() << "alloc after a sticky error should throw";
  } catch (const TargetError& e) {
    EXPECT_NE(std::string(e.what()).find("lost"), std::string::npos) << e.what();
  }
  EXPECT_THROW(backend->invoke(r, gputest::write_nothing), TargetError);
}

}  // namespace
}  // namespace kgate
