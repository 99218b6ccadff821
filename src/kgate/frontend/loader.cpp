// Loading a C ABI library in this process: dlopen, the ABI handshake and the entry symbol. Used by the
// worker; the driver never calls this on a candidate (it uses probe_entry, which runs this in a child).
#include <dlfcn.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "frontend/shape_expr.hpp"
#include "kgate/targets.hpp"

namespace kgate {
namespace {

std::string dl_error() {
  const char* e = dlerror();
  return e ? e : "unknown dlopen error";
}

// dlerror() names the path again; these are the phrases that mean "this is not a library at all".
bool says_not_a_library(const std::string& e) {
  for (const char* phrase : {"invalid ELF header", "file too short", "not an ELF", "wrong ELF class", "ELF load command"})
    if (e.find(phrase) != std::string::npos) return true;
  return false;
}

}  // namespace

EntrySpec parse_entry(std::string_view text, std::string_view default_symbol) {
  // The symbol follows the last ':' only if it looks like a C identifier, so a path with a ':' in a
  // directory name still works.
  const std::size_t colon = text.rfind(':');
  EntrySpec e{std::string(text), std::string(default_symbol)};
  if (colon != std::string_view::npos && is_identifier(text.substr(colon + 1))) {
    e.library = std::string(text.substr(0, colon));
    e.symbol = std::string(text.substr(colon + 1));
  } else if (colon + 1 == text.size()) {
    throw LoadError(fmt::format("\"{}\": empty symbol after ':' (write lib.so or lib.so:symbol)", text));
  }
  if (e.library.empty()) throw LoadError(fmt::format("\"{}\": no library path (write lib.so or lib.so:symbol)", text));
  return e;
}

LoadedEntry load_entry(const EntrySpec& spec) {
  const std::string& lib = spec.library;
  struct stat st {};
  if (stat(lib.c_str(), &st) != 0) throw LoadError(fmt::format("{}: cannot open: {}", lib, std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw LoadError(fmt::format("{}: is a directory, not a shared library", lib));

  // A bare name would make dlopen search the system's library path instead of opening this file.
  const std::string path = lib.find('/') == std::string::npos ? "./" + lib : lib;
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const std::string e = dl_error();
    if (says_not_a_library(e)) throw LoadError(fmt::format("{}: not a shared library ({})", lib, e));
    throw LoadError(fmt::format("{}: cannot load: {}", lib, e));
  }
  auto fail = [&](std::string what) -> LoadError {
    dlclose(handle);
    return LoadError(std::move(what));
  };

  auto version = reinterpret_cast<kgate_abi_version_fn>(dlsym(handle, "kgate_abi_version"));
  if (!version)
    throw fail(fmt::format("{}: does not export kgate_abi_version (was it built against kgate/abi.h, with "
                           "extern \"C\" and default visibility?)", lib));
  const std::int32_t v = version();
  if (v != KGATE_ABI_VERSION)
    throw fail(fmt::format("{}: built against ABI {}, this kgate speaks ABI {}", lib, v, KGATE_ABI_VERSION));

  dlerror();
  auto entry = reinterpret_cast<kgate_entry_fn>(dlsym(handle, spec.symbol.c_str()));
  if (!entry) throw fail(fmt::format("{}: does not export the entry {}", lib, spec.symbol));

  LoadedEntry out;
  out.handle = handle;
  out.entry = entry;
  if (auto device = reinterpret_cast<kgate_device_fn>(dlsym(handle, "kgate_device"))) {
    const std::int32_t d = device();
    if (d != kDLCPU && d != kDLCUDA)
      throw fail(fmt::format("{}: kgate_device() returned {}, which kgate does not run (expected kDLCPU = {} or "
                             "kDLCUDA = {})", lib, d, static_cast<int>(kDLCPU), static_cast<int>(kDLCUDA)));
    out.device = static_cast<DLDeviceType>(d);
  }
  return out;
}

}  // namespace kgate
