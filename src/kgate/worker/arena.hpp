// The shared arena: one memfd both processes map, through which tensor bytes cross without streaming
// through a pipe (a 64 MB write costs one memcpy on each side).
//
// The driver creates it sealed against shrinking: a hostile worker that truncated the file would
// otherwise make the driver's next access of its mapping raise SIGBUS. It may still grow the file; the
// driver only ever maps as much as it has itself checked it needs.
#pragma once

#include <cstddef>

namespace kgate {

class SharedArena {
 public:
  static SharedArena create(std::size_t initial_bytes);  // driver side; throws TargetError
  static SharedArena adopt(int fd);                      // worker side, the descriptor it inherited
  SharedArena(SharedArena&& other) noexcept;
  SharedArena& operator=(SharedArena&& other) noexcept;
  SharedArena(const SharedArena&) = delete;
  SharedArena& operator=(const SharedArena&) = delete;
  ~SharedArena();

  int fd() const { return fd_; }
  // At least `bytes` writable bytes at the start, growing the file if it is shorter.
  std::byte* reserve(std::size_t bytes);
  // At least `bytes` bytes the file already holds; throws TargetError if it holds fewer.
  std::byte* view(std::size_t bytes);

 private:
  SharedArena() = default;
  void map(std::size_t bytes);
  std::size_t file_size() const;

  int fd_ = -1;
  std::byte* base_ = nullptr;
  std::size_t mapped_ = 0;
};

}  // namespace kgate
