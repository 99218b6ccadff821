// tests/glr_sm90/env_switch_test.cpp: the sm90 switches' one reader (glr/cuda/sm90/env_switch.hpp) gives each
// documented value its meaning (glr/cuda/README.md) and refuses every other value with an InvalidArgument naming the
// variable. Tolerance-free; no GPU. Exits non-zero on the first failure, printing the variable, value and what came.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "../../glr/cuda/sm90/env_switch.hpp"

namespace {

namespace sm90 = glr::cuda::sm90;
constexpr const char* kVar = "GLR_ENV_SWITCH_TEST";
int failures = 0;

void set(const char* value) {
  if (value) setenv(kVar, value, 1);
  else unsetenv(kVar);
}

void expect_flag(const char* value, bool unset, bool want) {
  set(value);
  try {
    const bool got = sm90::env_flag(kVar, unset);
    if (got != want) {
      std::printf("FAIL env_flag %s='%s' (unset %d): %d, want %d\n", kVar, value ? value : "(unset)", unset, got, want);
      ++failures;
    }
  } catch (const glr::InvalidArgument& e) {
    std::printf("FAIL env_flag %s='%s': threw '%s'\n", kVar, value ? value : "(unset)", e.what());
    ++failures;
  }
}

// read() reads the variable set to value (the reader `what`) and must give want without throwing.
template <class F>
void expect_int(const char* what, F read, const char* value, int want) {
  set(value);
  try {
    const int got = read();
    if (got != want) {
      std::printf("FAIL %s %s='%s': %d, want %d\n", what, kVar, value ? value : "(unset)", got, want);
      ++failures;
    }
  } catch (const glr::InvalidArgument& e) {
    std::printf("FAIL %s %s='%s': threw '%s'\n", what, kVar, value ? value : "(unset)", e.what());
    ++failures;
  }
}

void expect_flag_or_unset(const char* value, int want) {
  expect_int("env_flag_or_unset", [] { return sm90::env_flag_or_unset(kVar, "the caller's"); }, value, want);
}

void expect_count(const char* value, int want) {
  expect_int("env_count", [] { return sm90::env_count(kVar, 1, 4096); }, value, want);
}

// f reads the variable set to value and must throw an InvalidArgument whose argument() is the variable.
template <class F>
void expect_refused(const char* what, const char* value, F f) {
  set(value);
  try {
    f();
    std::printf("FAIL %s %s='%s': accepted\n", what, kVar, value);
    ++failures;
  } catch (const glr::InvalidArgument& e) {
    if (e.argument() != kVar) {
      std::printf("FAIL %s %s='%s': the error names '%s'\n", what, kVar, value, e.argument().c_str());
      ++failures;
    }
  }
}

}  // namespace

int main() {
  for (bool unset : {false, true}) {
    expect_flag(nullptr, unset, unset);
    expect_flag("", unset, unset);
    expect_flag("0", unset, false);
    expect_flag("1", unset, true);
  }
  for (const char* bad : {"2", "01", "1 ", "true", "on", "-1", "yes"})
    expect_refused("env_flag", bad, [] { sm90::env_flag(kVar, true); });
  // The switch whose unset meaning is its caller's (GLR_DH_WGMMA: dh_kernel unsplit, dh_wgmma_kernel split): -1 unset.
  expect_flag_or_unset(nullptr, -1);
  expect_flag_or_unset("", -1);
  expect_flag_or_unset("0", 0);
  expect_flag_or_unset("1", 1);
  for (const char* bad : {"2", "01", "1 ", "true", "-1"})
    expect_refused("env_flag_or_unset", bad, [] { sm90::env_flag_or_unset(kVar, "the caller's"); });
  expect_count(nullptr, 0);
  expect_count("", 0);
  expect_count("auto", 0);
  expect_count("1", 1);
  expect_count("8", 8);
  expect_count("4096", 4096);
  for (const char* bad : {"0", "4097", "-1", "+8", " 8", "8x", "x", "Auto", "99999999999999999999"})
    expect_refused("env_count", bad, [] { sm90::env_count(kVar, 1, 4096); });
  // The split switches' values (env_split: GLR_FORWARD_SPLIT, GLR_BACKWARD_SPLIT): auto, a count n (segs n, len 1),
  // L and a length m (segs 4096, len m); the backward's trailing h (the h pass only).
  auto expect_split = [](const char* value, bool allow_h, int segs, int len, bool h_only) {
    set(value);
    try {
      const sm90::SplitOverride o = sm90::env_split(kVar, allow_h);
      if (o.segs != segs || o.len != len || o.h_only != h_only) {
        std::printf("FAIL env_split %s='%s': %d %d %d, want %d %d %d\n", kVar, value ? value : "(unset)", o.segs, o.len,
                    o.h_only, segs, len, h_only);
        ++failures;
      }
    } catch (const glr::InvalidArgument& e) {
      std::printf("FAIL env_split %s='%s': threw '%s'\n", kVar, value ? value : "(unset)", e.what());
      ++failures;
    }
  };
  for (bool h : {false, true}) {
    expect_split(nullptr, h, 0, 1, false);
    expect_split("auto", h, 0, 1, false);
    expect_split("1", h, 1, 1, false);
    expect_split("4", h, 4, 1, false);
    expect_split("L64", h, 4096, 64, false);
    expect_split("L1", h, 4096, 1, false);
    expect_split("L65536", h, 4096, 65536, false);
  }
  expect_split("L64h", true, 4096, 64, true);
  expect_split("4h", true, 4, 1, true);
  for (const char* bad : {"L", "L0", "L65537", "L+8", "l64", "64L", "L64x", "4h", "L64h", "h", "0"})
    expect_refused("env_split", bad, [] { sm90::env_split(kVar, false); });
  for (const char* bad : {"h", "hh", "L64hh", "L0h", "Lh", "4096h1"})
    expect_refused("env_split", bad, [] { sm90::env_split(kVar, true); });
  // A switch's reader itself (GLR_H_WGMMA's, bwd_h_wgmma): a bad value throws naming the variable, and since the
  // function-local static was not set, the next call reads the variable again.
  setenv("GLR_H_WGMMA", "on", 1);
  try {
    sm90::bwd_h_wgmma();
    std::printf("FAIL bwd_h_wgmma GLR_H_WGMMA='on': accepted\n");
    ++failures;
  } catch (const glr::InvalidArgument& e) {
    if (e.argument() != "GLR_H_WGMMA") {
      std::printf("FAIL bwd_h_wgmma GLR_H_WGMMA='on': the error names '%s'\n", e.argument().c_str());
      ++failures;
    }
  }
  setenv("GLR_H_WGMMA", "1", 1);
  if (!sm90::bwd_h_wgmma()) {
    std::printf("FAIL bwd_h_wgmma GLR_H_WGMMA='1' after a refused value: false\n");
    ++failures;
  }
  std::printf("%s\n", failures == 0 ? "ALL PASS" : "SOME FAILED");
  return failures == 0 ? 0 : 1;
}
