#include "worker/sandbox.hpp"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace kgate {

std::string restrict_writes(const std::vector<std::string>& writable) {
#if defined(SYS_landlock_create_ruleset) && defined(LANDLOCK_CREATE_RULESET_VERSION)
  const long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 1) return fmt::format("Landlock is not available: {}", std::strerror(errno));
  // Only the rights that change the file system are handled; reads, directory listing, execution and
  // device ioctls (a GPU needs them) stay unrestricted.
  std::uint64_t rights = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
                         LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
                         LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
                         LANDLOCK_ACCESS_FS_MAKE_SYM;
#ifdef LANDLOCK_ACCESS_FS_REFER
  if (abi >= 2) rights |= LANDLOCK_ACCESS_FS_REFER;
#endif
#ifdef LANDLOCK_ACCESS_FS_TRUNCATE
  if (abi >= 3) rights |= LANDLOCK_ACCESS_FS_TRUNCATE;
#endif
  landlock_ruleset_attr attr{};
  attr.handled_access_fs = rights;
  const int ruleset = static_cast<int>(syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0));
  if (ruleset < 0) return fmt::format("landlock_create_ruleset: {}", std::strerror(errno));
  for (const std::string& dir : writable) {
    landlock_path_beneath_attr beneath{};
    beneath.allowed_access = rights;
    beneath.parent_fd = open(dir.c_str(), O_PATH | O_CLOEXEC);
    if (beneath.parent_fd < 0) continue;  // a listed directory that does not exist needs no rule
    const long added = syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &beneath, 0);
    close(beneath.parent_fd);
    if (added != 0) {
      close(ruleset);
      return fmt::format("landlock_add_rule({}): {}", dir, std::strerror(errno));
    }
  }
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);  // required by landlock_restrict_self for an unprivileged process
  const long restricted = syscall(SYS_landlock_restrict_self, ruleset, 0);
  const int err = errno;
  close(ruleset);
  return restricted == 0 ? "" : fmt::format("landlock_restrict_self: {}", std::strerror(err));
#else
  (void)writable;
  return "this build has no Landlock headers";
#endif
}

}  // namespace kgate
