// The CUDA detection matrix: every control of controls/cuda/manifest.toml verified as a real candidate (its
// own worker on the GPU, its oracle in another) over at least 10 seeds. Holds when every broken control
// fails each of its intended gates on every seed and no correct control fails anything. Skips without a GPU.
//
// Environment (scripts/gpu-check sets these): KGATE_MATRIX_SEEDS (default 10, at least 10 is the bar),
// KGATE_MATRIX_SEED (first seed, default fixed so a failure reproduces), KGATE_MATRIX_JOBS (default 4),
// KGATE_MATRIX_REPORT (also write the table there), KGATE_MATRIX_JSON (and the counts as JSON),
// KGATE_CUDA_MANIFEST (another manifest).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "backend/cuda/cuda_backend.hpp"
#include "kgate/matrix.hpp"
#include "kgate/report.hpp"

namespace kgate {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

TEST(CudaDetectionMatrix, EveryBrokenControlCaughtAndNoCorrectOneFlagged) {
  std::string why;
  if (!cuda_device_available(&why)) GTEST_SKIP() << "no GPU here, CUDA detection matrix skipped: " << why;
  const std::string manifest = env_or("KGATE_CUDA_MANIFEST", KGATE_CUDA_MANIFEST);
  std::vector<ControlEntry> controls;
  try {
    controls = load_manifest(manifest);
  } catch (const ManifestError& e) {
    FAIL() << e.what();
  }
  MatrixOptions o;
  o.manifest = manifest;
  o.seeds = std::stoi(env_or("KGATE_MATRIX_SEEDS", "10"));
  o.seed = std::stoull(env_or("KGATE_MATRIX_SEED", "20261202"));
  o.jobs = std::stoi(env_or("KGATE_MATRIX_JOBS", "4"));
  o.quiet = true;
  EXPECT_GE(o.seeds, 10) << "the bar is at least 10 seeds per control";

  int last_percent = -1;
  const MatrixResult m = run_matrix(controls, o, [&](int done, int total) {
    const int percent = total ? 100 * done / total : 100;
    if (percent / 10 != last_percent / 10) std::fprintf(stderr, "cuda matrix: %d/%d verifications\n", done, total);
    last_percent = percent;
  });
  const std::string table = format_matrix(m, false);
  std::printf("%s\n", table.c_str());
  if (const std::string path = env_or("KGATE_MATRIX_REPORT", ""); !path.empty()) write_file_atomic(path, table);
  if (const std::string path = env_or("KGATE_MATRIX_JSON", ""); !path.empty()) write_file_atomic(path, matrix_json(m));

  const MatrixJudgement j = judge(m);
  for (const std::string& p : j.problems) ADD_FAILURE() << p;
  EXPECT_TRUE(j.holds) << j.summary;
}

}  // namespace
}  // namespace kgate
