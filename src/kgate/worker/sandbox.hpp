// The worker's write sandbox: before any candidate code runs, the worker gives up the right to create,
// change or delete files anywhere but its own directory and /dev, so a candidate optimised against
// kgate cannot rewrite the results file, the oracle library or kgate itself (DESIGN.md threat model).
// Reading stays allowed: a candidate may read what it likes, it only cannot change what judges it.
#pragma once

#include <string>
#include <vector>

namespace kgate {

// Uses Landlock (Linux 5.13+). Returns "" when the sandbox is in force, else why not (an old kernel,
// Landlock disabled): the worker then runs without it, which is still isolated, only less so.
// `writable` lists the directories (with everything beneath) that stay writable.
std::string restrict_writes(const std::vector<std::string>& writable);

}  // namespace kgate
