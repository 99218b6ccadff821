// tests/glr_sm90/emu_dump.hpp: GLR_EMU_DUMP=DIR makes the emulator checks write each case's outputs' raw bytes to
// DIR/NNNN.NAME (NNNN the case's number in the run, NAME the output), so two builds' outputs can be compared word
// for word (tests/glr_sm90/count_words.py): how many o or gradient words a kernel change moves, and where. The digest
// (GLR_EMU_DIGEST) says only whether anything moved.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace emu_dump {

inline int& case_number() {
  static int n = 0;
  return n;
}
// Called once a case, before its dump() calls.
inline void next_case() { ++case_number(); }
inline void dump(const char* name, const void* data, std::size_t bytes) {
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

}  // namespace emu_dump
