// `flashjit run --op layer-norm --counters` on the emulator: the global bytes the forward and
// the backward move stay within 5 % of the least they must (x, y, dy, dx once; γ, β, the
// bias and the backward's partial sums once per block or cluster), at row lengths held in
// registers (768, 4096), in one block's shared memory (16 384) and split over a cluster
// (16 384 fp32 backward, 65 536), with more rows than the persistent grid has blocks so that
// a vector read again per row would show.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "support/temp_dir.hpp"
#include "tools/cli_runner.hpp"

namespace flashjit::testing {
namespace {

/// The ratio printed after `name` (a line "name   1.0000 (...)"); -1 when absent.
double ratio_after(const std::string& output, const std::string& name) {
  const std::size_t at = output.find(name);
  if (at == std::string::npos) return -1.0;
  return std::strtod(output.c_str() + at + name.size(), nullptr);
}

TEST_CASE("run --op layer-norm --counters: global bytes within 1.05x of the minimum") {
  TempDir dir;
  const std::vector<std::vector<std::string>> shapes = {
      {"--arch", "sm_80", "--dtype", "bf16", "--rows", "512", "--cols", "768"},
      {"--arch", "sm_90a", "--dtype", "bf16", "--rows", "512", "--cols", "768", "--residual"},
      {"--arch", "sm_90a", "--dtype", "fp32", "--rows", "512", "--cols", "4096", "--rms"},
      {"--arch", "sm_90a", "--dtype", "fp32", "--rows", "200", "--cols", "16384"},
      {"--arch", "sm_90a", "--dtype", "bf16", "--rows", "40", "--cols", "65536", "--bias"},
  };
  for (const std::vector<std::string>& shape : shapes) {
    std::vector<std::string> args = {"run", "--emulate", "--op", "layer-norm", "--counters"};
    args.insert(args.end(), shape.begin(), shape.end());
    const ChildResult run = flashjit_cli(args, dir.path().string());
    CAPTURE(run.output);
    REQUIRE(run.exit_code == 0);
    CHECK(run.out.find("PASS") != std::string::npos);
    const double forward = ratio_after(run.out, "forward_global_bytes_ratio");
    const double backward = ratio_after(run.out, "backward_global_bytes_ratio");
    CHECK(forward >= 1.0);  // the minimum is a floor: a ratio below it means a miscount
    CHECK(forward <= 1.05);
    CHECK(backward >= 1.0);
    CHECK(backward <= 1.05);
    if (shape.back() == "--bias") {  // 65 536 columns: each row split over a cluster
      CHECK(run.out.find(".x4.") != std::string::npos);  // the forward's 4 blocks
      CHECK(run.out.find(".x8.") != std::string::npos);  // the backward's 8 (three partials)
    }
  }
}

}  // namespace
}  // namespace flashjit::testing
