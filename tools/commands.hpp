// The kgate subcommands, each a function from parsed options to an exit status:
// 0 clean, 1 a violation found, 2 bad usage or input.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kgate::cli {

inline constexpr int kClean = 0;
inline constexpr int kViolation = 1;
inline constexpr int kBadInput = 2;

struct VerifyArgs {
  std::string contract;
  std::string kernel;                  // lib.so or lib.so:symbol (default kgate_run)
  std::string oracle;                  // empty: the kernel's library, symbol kgate_oracle
  std::vector<std::string> gates;      // empty: all
  std::optional<std::string> seed;     // none: a fresh secret seed, printed; else decimal or 0x hex
  std::string json;                    // written atomically once complete; FILE.partial until then
  std::optional<double> timeout;       // seconds per call; none: the contract's [limits] timeout
  double tolerance_scale = 1.0;
  bool shrink = true;
  double memory_limit_mb = 0;          // per worker process; 0: none
  std::vector<std::string> sanitizers; // --sanitizer memcheck,...: the bounds gate's compute-sanitizer pass
};
int run_verify(const VerifyArgs& args);

int run_list_gates();
int run_explain(const std::string& gate);

// One line on stderr: "kgate: error: ...".
void print_error(const std::string& message);
// Colour only for a terminal, and never when NO_COLOR is set (no-color.org).
bool use_color(int fd);

}  // namespace kgate::cli
