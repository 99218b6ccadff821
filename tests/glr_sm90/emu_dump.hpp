// tests/glr_sm90/emu_dump.hpp: one record of each emulator case's outputs (emu_check.cpp, emu_bwd_check.cpp), for
// comparing two builds. GLR_EMU_DIGEST (set): a digest (FNV-1a 64) of every output's bytes in the order added, which
// says whether anything moved. GLR_EMU_DUMP=DIR: each output's raw bytes to DIR/NNNN.NAME (NNNN the case's number in
// the run), so tests/glr_sm90/count_words.py can say how many o or gradient words a kernel change moves, and where.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace emu_dump {

inline int& case_number() {
  static int n = 0;
  return n;
}

// One case's outputs: construct once a case (it numbers the case), then add() each output.
class Case {
 public:
  Case() { ++case_number(); }
  void add(const char* name, const void* data, std::size_t bytes) {
    const auto* b = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < bytes; ++i) digest_ = (digest_ ^ b[i]) * 1099511628211ull;
    const char* dir = std::getenv("GLR_EMU_DUMP");
    if (dir == nullptr || *dir == 0) return;
    char file[64];
    std::snprintf(file, sizeof file, "/%04d.%s", case_number(), name);
    const std::string path = std::string(dir) + file;
    if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
      std::fwrite(data, 1, bytes, f);
      std::fclose(f);
    }
  }
  // The digest of what was added, or false where GLR_EMU_DIGEST is not set.
  bool digest(unsigned long long& d) const {
    d = digest_;
    return std::getenv("GLR_EMU_DIGEST") != nullptr;
  }

 private:
  std::uint64_t digest_ = 1469598103934665603ull;
};

}  // namespace emu_dump
