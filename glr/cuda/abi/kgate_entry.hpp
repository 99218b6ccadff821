// glr/cuda/abi/kgate_entry.hpp: the body every glr kgate entry point shares: read the call, run, and map
// each failure to its kgate status (a bad or unsupported input is a clean refusal, before anything runs).
#pragma once

#include <exception>

#include "abi_call.hpp"

namespace glr::abi {

template <class F>
std::int32_t guarded_entry(const kgate_call* call, F&& body) {
  if (call == nullptr) return KGATE_ERROR;
  try {
    body();
    return KGATE_OK;
  } catch (const Refused& r) {
    say(*call, "glr: " + r.why);
    return KGATE_REFUSED;
  } catch (const InvalidArgument& e) {
    say(*call, e.what());
    return KGATE_REFUSED;
  } catch (const std::exception& e) {
    say(*call, e.what());
    return KGATE_ERROR;
  } catch (...) {
    say(*call, "glr: unknown error");
    return KGATE_ERROR;
  }
}

}  // namespace glr::abi
