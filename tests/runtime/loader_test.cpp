// The loader: every way a library can fail the handshake gets its own message naming the library and
// what is wrong, both in this process (load_entry, as the worker uses it) and through a probe child.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "kgate/targets.hpp"

namespace kgate {
namespace {

std::string fixture(const char* name) { return std::string(KGATE_FIXTURES) + "/" + name + ".so"; }

std::string load_message(const EntrySpec& spec) {
  try {
    load_entry(spec);
  } catch (const LoadError& e) {
    return e.what();
  }
  return "(loaded)";
}

std::string probe_message(const EntrySpec& spec) {
  try {
    probe_entry(spec, 5.0);
  } catch (const LoadError& e) {
    return e.what();
  }
  return "(loaded)";
}

TEST(ParseEntry, LibraryAloneOrWithSymbol) {
  EntrySpec a = parse_entry("lib/k.so", "kgate_run");
  EXPECT_EQ(a.library, "lib/k.so");
  EXPECT_EQ(a.symbol, "kgate_run");
  EntrySpec b = parse_entry("lib/k.so:my_kernel", "kgate_run");
  EXPECT_EQ(b.library, "lib/k.so");
  EXPECT_EQ(b.symbol, "my_kernel");
  // A ':' inside a directory name is not a symbol separator.
  EntrySpec c = parse_entry("/data/run:3/k.so", "kgate_oracle");
  EXPECT_EQ(c.library, "/data/run:3/k.so");
  EXPECT_EQ(c.symbol, "kgate_oracle");
  EXPECT_THROW(parse_entry("k.so:", "kgate_run"), LoadError);
  EXPECT_THROW(parse_entry(":sym", "kgate_run"), LoadError);
  EXPECT_THROW(parse_entry("", "kgate_run"), LoadError);
}

TEST(LoadEntry, LoadsAGoodLibraryAndAnyNamedSymbol) {
  const LoadedEntry run = load_entry({fixture("fx_behave"), "kgate_run"});
  EXPECT_NE(run.entry, nullptr);
  EXPECT_EQ(run.device, kDLCPU);
  const LoadedEntry oracle = load_entry({fixture("fx_behave"), "kgate_oracle"});
  EXPECT_NE(oracle.entry, run.entry);
}

TEST(LoadEntry, MissingFile) {
  EXPECT_EQ(load_message({"/nonexistent/k.so", "kgate_run"}), "/nonexistent/k.so: cannot open: No such file or directory");
}

TEST(LoadEntry, FileThatIsNotALibrary) {
  const std::string path = ::testing::TempDir() + "kgate_not_a_library.so";
  std::ofstream(path) << "#!/bin/sh\n# a script long enough that the loader reads a whole ELF header from it and rejects that\n";
  const std::string m = load_message({path, "kgate_run"});
  EXPECT_EQ(m.rfind(path + ": not a shared library (", 0), 0u) << m;
  EXPECT_NE(m.find("invalid ELF header"), std::string::npos) << m;  // dlerror's own words are quoted
  std::remove(path.c_str());
}

TEST(LoadEntry, MissingAbiVersion) {
  const std::string m = load_message({fixture("fx_no_abi"), "kgate_run"});
  EXPECT_EQ(m.rfind(fixture("fx_no_abi") + ": does not export kgate_abi_version", 0), 0u) << m;
}

TEST(LoadEntry, AbiMismatch) {
  EXPECT_EQ(load_message({fixture("fx_abi7"), "kgate_run"}),
            fixture("fx_abi7") + ": built against ABI 7, this kgate speaks ABI 1");
}

TEST(LoadEntry, MissingEntrySymbol) {
  EXPECT_EQ(load_message({fixture("fx_no_entry"), "kgate_run"}), fixture("fx_no_entry") + ": does not export the entry kgate_run");
  EXPECT_EQ(load_message({fixture("fx_behave"), "kgate_rnu"}), fixture("fx_behave") + ": does not export the entry kgate_rnu");
}

TEST(LoadEntry, UnknownDevice) {
  const std::string m = load_message({fixture("fx_bad_device"), "kgate_run"});
  EXPECT_EQ(m.rfind(fixture("fx_bad_device") + ": kgate_device() returned 9, which kgate does not run", 0), 0u) << m;
}

TEST(ProbeEntry, ReportsTheSameErrorsFromAChild) {
  EXPECT_EQ(probe_entry({fixture("fx_behave"), "kgate_run"}), kDLCPU);
  EXPECT_EQ(probe_message({fixture("fx_abi7"), "kgate_run"}),
            fixture("fx_abi7") + ": built against ABI 7, this kgate speaks ABI 1");
  EXPECT_EQ(probe_message({fixture("fx_no_entry"), "kgate_run"}), fixture("fx_no_entry") + ": does not export the entry kgate_run");
  EXPECT_EQ(probe_message({"/nonexistent/k.so", "kgate_run"}), "/nonexistent/k.so: cannot open: No such file or directory");
}

TEST(ProbeEntry, ConstructorCrashStaysInTheChild) {
  try {
    probe_entry({fixture("fx_ctor_crash"), "kgate_run"}, 5.0);
    FAIL() << "a library whose constructor segfaults was accepted";
  } catch (const LoadCrash& e) {
    EXPECT_EQ(e.outcome(), CallOutcome::crashed);
    EXPECT_EQ(std::string(e.what()), fixture("fx_ctor_crash") + ": crashed while loading: SIGSEGV (Segmentation fault)");
  }
}

}  // namespace
}  // namespace kgate
