// A compute-sanitizer log from this folder (README.md says where each came from), by file name. The engine's parser
// tests and the GPU test include this; both targets define KGATE_SANITIZER_LOGS_DIR as this folder. An empty or
// missing file is said on stderr (the tests then fail on its contents).
#pragma once

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace kgate::test {

inline std::string sanitizer_log(const char* name) {
  std::ifstream in(std::string(KGATE_SANITIZER_LOGS_DIR) + "/" + name, std::ios::binary);
  std::ostringstream o;
  o << in.rdbuf();
  if (o.str().empty()) std::fprintf(stderr, "no sanitizer log %s in %s\n", name, KGATE_SANITIZER_LOGS_DIR);
  return o.str();
}

}  // namespace kgate::test
