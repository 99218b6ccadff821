#include "worker/arena.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "kgate/target.hpp"

namespace kgate {
namespace {

constexpr std::size_t kPage = 4096;

std::size_t round_up(std::size_t n) { return (n + kPage - 1) / kPage * kPage; }

[[noreturn]] void fail(const char* what) {
  throw TargetError(fmt::format("shared arena: {}: {}", what, std::strerror(errno)));
}

}  // namespace

SharedArena SharedArena::create(std::size_t initial) {
  SharedArena a;
  a.fd_ = memfd_create("kgate-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (a.fd_ < 0) fail("memfd_create");
  if (ftruncate(a.fd_, static_cast<off_t>(round_up(initial ? initial : kPage))) != 0) fail("ftruncate");
  // No shrinking (SIGBUS in the driver) and no further seals (a worker sealing growth would stall it).
  if (fcntl(a.fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL) != 0) fail("F_ADD_SEALS");
  a.map(a.file_size());
  return a;
}

SharedArena SharedArena::adopt(int fd) {
  SharedArena a;
  a.fd_ = fd;
  a.map(a.file_size());
  return a;
}

SharedArena::SharedArena(SharedArena&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), base_(std::exchange(o.base_, nullptr)), mapped_(std::exchange(o.mapped_, 0)) {}

SharedArena& SharedArena::operator=(SharedArena&& o) noexcept {
  if (this != &o) {
    this->~SharedArena();
    fd_ = std::exchange(o.fd_, -1);
    base_ = std::exchange(o.base_, nullptr);
    mapped_ = std::exchange(o.mapped_, 0);
  }
  return *this;
}

SharedArena::~SharedArena() {
  if (base_) munmap(base_, mapped_);
  if (fd_ >= 0) close(fd_);
}

std::size_t SharedArena::file_size() const {
  struct stat st {};
  if (fstat(fd_, &st) != 0) fail("fstat");
  return static_cast<std::size_t>(st.st_size);
}

void SharedArena::map(std::size_t bytes) {
  if (base_) munmap(base_, mapped_);
  base_ = nullptr;
  mapped_ = 0;
  if (bytes == 0) return;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) fail("mmap");
  base_ = static_cast<std::byte*>(p);
  mapped_ = bytes;
}

std::byte* SharedArena::reserve(std::size_t bytes) {
  if (bytes <= mapped_) return base_;
  // Doubling keeps a growing workload to few remaps. The size comes from what this side needs, never
  // from the file's size, which the other side may have grown to anything.
  const std::size_t size = round_up(std::max(bytes, 2 * mapped_));
  if (file_size() < size && ftruncate(fd_, static_cast<off_t>(size)) != 0) fail("ftruncate");
  map(size);
  return base_;
}

std::byte* SharedArena::view(std::size_t bytes) {
  if (bytes <= mapped_) return base_;
  const std::size_t size = file_size();
  if (size < bytes) throw TargetError(fmt::format("shared arena holds {} bytes, {} needed", size, bytes));
  map(bytes);
  return base_;
}

}  // namespace kgate
