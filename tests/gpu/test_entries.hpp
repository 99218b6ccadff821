// Entry points the CUDA backend tests call in-process: each misbehaves (or behaves) in one known way.
// Tensors are f32 and dense unless said otherwise; attrs are read by name.
#pragma once

#include <cstdint>

#include "kgate/abi.h"

namespace kgate::gputest {

std::int32_t copy_on_stream(const kgate_call& c);      // y = x on call->stream
std::int32_t copy_on_legacy(const kgate_call& c);      // y = x on the legacy default stream (the defect)
std::int32_t copy_on_stray(const kgate_call& c);       // spins ~100 ms on its own stream, then y = x there
std::int32_t write_before(const kgate_call& c);        // writes attr "byte" one byte before output 0
std::int32_t write_after(const kgate_call& c);         // writes attr "byte" one byte past output 0's end
std::int32_t write_nothing(const kgate_call& c);       // returns OK, writes nothing
std::int32_t report_stream(const kgate_call& c);       // message: "null" or "nonblocking" or "blocking"
std::int32_t bad_launch(const kgate_call& c);          // a launch with 4096 threads per block (not sticky)
std::int32_t illegal_address(const kgate_call& c);     // stores through a wild pointer (sticky)
// y[0] = 1 when the partner invocation (attr "slot" 0 or 1) was seen running at the same time within 2 s,
// else 0. attr "round" must grow from call to call.
std::int32_t rendezvous(const kgate_call& c);

}  // namespace kgate::gputest
