// kgate: verify GPU kernels against their contracts. Subcommands: verify, list-gates, explain, matrix.
#include <sys/prctl.h>

#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "commands.hpp"
#include "kgate/verify.hpp"

#if __has_include("kgate/matrix.hpp")
#include "kgate/matrix.hpp"
#define KGATE_HAVE_MATRIX 1
#endif

namespace {

using namespace kgate::cli;

int main_or_throw(int argc, char** argv) {
  CLI::App app{"kgate: a contract-grade verifier for GPU kernels. Exit status: 0 clean, 1 a violation found, "
               "2 bad usage or input."};
  app.require_subcommand(1);
  app.set_version_flag("--version", KGATE_VERSION);

  VerifyArgs v;
  CLI::App* verify = app.add_subcommand("verify", "run the gates of a contract against a kernel library");
  verify->add_option("--contract", v.contract, "contract file (TOML, see docs/contracts.md)")->required();
  verify->add_option("--kernel", v.kernel, "candidate library, lib.so or lib.so:symbol (default symbol kgate_run)")
      ->required();
  verify->add_option("--oracle", v.oracle,
                     "float64 oracle library, lib.so or lib.so:symbol (default: the kernel's library, kgate_oracle)");
  verify->add_option("--gates", v.gates, "comma-separated gates to run (default: all; see kgate list-gates)")
      ->delimiter(',');
  verify->add_option("--seed", v.seed, "run seed (default: a fresh secret one, printed with the verdicts)");
  verify->add_option("--json", v.json,
                     "write the JSON report here once complete (FILE.partial holds the verdicts until then)");
  verify->add_option("--timeout", v.timeout, "seconds per candidate call (default: the contract's [limits] timeout)");
  verify->add_option("--tolerance-scale", v.tolerance_scale, "multiply every tolerance by this (default 1)");
  verify->add_option("--memory-limit", v.memory_limit_mb,
                     "megabytes of host memory each worker process may allocate (default: no limit)");
  verify->add_option("--sanitizer", v.sanitizers,
                     "also run the bounds gate's calls under compute-sanitizer with these tools (memcheck, "
                     "racecheck, initcheck, synccheck; CUDA kernels, CUDA builds only)")
      ->delimiter(',');
  bool no_shrink = false;
  verify->add_flag("--no-shrink", no_shrink, "report a failing case as found, without shrinking it");
  bool unsafe = false;
  verify->add_flag("--unsafe-no-isolation", unsafe,
                   "run the workers without namespaces, uid drop and seccomp (machines without them; tests)");

  app.add_subcommand("list-gates", "the twelve gates and baseline, with tolerance-free marks");

  std::string gate;
  CLI::App* explain = app.add_subcommand("explain", "what a gate checks, how, and what its evidence looks like");
  explain->add_option("gate", gate, "gate name")->required();

#ifdef KGATE_HAVE_MATRIX
  kgate::MatrixOptions m;
  CLI::App* matrix = app.add_subcommand("matrix", "the detection matrix: every positive control over many seeds");
  matrix->add_option("--manifest", m.manifest, "controls manifest (default: the build tree's controls/manifest.toml)");
  matrix->add_option("--seeds", m.seeds, "seeds per control (default 20)");
  matrix->add_option("--seed", m.seed, "first seed (default: a fresh one, printed)");
  matrix->add_option("--jobs", m.jobs, "verifications in parallel (default 2)");
  matrix->add_option("--controls", m.controls, "comma-separated controls to run (default: all)")->delimiter(',');
  matrix->add_option("--gates", m.gates, "comma-separated gate columns (default: all)")->delimiter(',');
  matrix->add_option("--json", m.json, "also write the counts as JSON here");
  matrix->add_flag("--quiet", m.quiet, "no progress line on stderr");
#endif

  // CLI11 would only say "a subcommand is required"; name the word it did not know instead.
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> names;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      names.push_back(sub->get_name());
      known = known || sub->get_name() == argv[1];
    }
    if (!known) {
      print_error(fmt::format("unknown command \"{}\" (commands: {})", argv[1], fmt::join(names, ", ")));
      return kBadInput;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    print_error(fmt::format("{} (see kgate --help)", e.what()));
    return kBadInput;
  }

  if (verify->parsed()) {
    v.shrink = !no_shrink;
    if (unsafe) setenv("KGATE_UNSAFE_NO_ISOLATION", "1", 1);  // read where the worker is started
    return run_verify(v);
  }
  if (app.got_subcommand("list-gates")) return run_list_gates();
  if (explain->parsed()) return run_explain(gate);
#ifdef KGATE_HAVE_MATRIX
  if (matrix->parsed()) {
    m.color = use_color(1);
    return kgate::run_matrix_command(m);
  }
#endif
  return kBadInput;
}

}  // namespace

int main(int argc, char** argv) {
  // The candidate runs as the same user: without this it could read the driver's memory (where oracle
  // outputs live) through /proc/PID/mem or ptrace wherever the kernel's ptrace policy allows it.
  prctl(PR_SET_DUMPABLE, 0);
  kgate::keep_large_allocations_in_heap();  // every call's arrays reuse the previous call's pages
  try {
    return main_or_throw(argc, argv);
  } catch (const std::exception& e) {
    print_error(fmt::format("internal: {}", e.what()));
    return kBadInput;
  }
}
