// `flashjit run --emulate --config` and `autotune --emulate` at head dim 72, which the emulator
// was not built with: the first run compiles its kernels with the host compiler (one line
// each on stderr), the second identical run loads them from the cache and compiles nothing.
// Small shapes: the host compiles take a second or two each.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "support/temp_dir.hpp"

using flashjit::testing::ChildResult;
using flashjit::testing::contains;
using flashjit::testing::count_lines_with;
using flashjit::testing::flashjit_cli;
using flashjit::testing::TempDir;

namespace {

const std::vector<std::string> kSmallShape = {"--batch", "1", "--heads", "1", "--seqlen-q", "128"};

std::vector<std::string> run_args(std::vector<std::string> args) {
  args.insert(args.begin(), {"run", "--emulate", "--head-dim", "72"});
  args.insert(args.end(), kSmallShape.begin(), kSmallShape.end());
  return args;
}

constexpr const char* kCompiling = "flashjit: compiling ";

}  // namespace

TEST_CASE("run --emulate --config at head dim 72: compiled for the host once, then cached") {
  TempDir dir;
  const std::string cache = dir.path().string();
  const std::vector<std::string> args = run_args({"--config", "br64.bc32.w4.s1"});
  const ChildResult first = flashjit_cli(args, cache);
  REQUIRE_MESSAGE(first.exit_code == 0, first.output);
  CHECK(contains(first.out,
                 "kernel:  attention_forward.hdim72.bf16.br64.bc32.w4.s1.sm80 (--config)"));
  CHECK(contains(first.out, "PASS"));
  CHECK_MESSAGE(count_lines_with(first.err, kCompiling) == 1, first.err);
  CHECK(contains(first.err,
                 "compiling attention_forward.hdim72.bf16.br64.bc32.w4.s1 for the "
                 "emulator with /"));

  const ChildResult second = flashjit_cli(args, cache);
  REQUIRE_MESSAGE(second.exit_code == 0, second.output);
  CHECK(contains(second.out, "PASS"));
  CHECK_MESSAGE(count_lines_with(second.err, kCompiling) == 0, second.err);

  const ChildResult list = flashjit_cli({"cache", "list"}, cache);
  CHECK(contains(list.output, "attention_forward.hdim72.bf16.br64.bc32.w4.s1.host host"));
}

TEST_CASE("run --emulate --arch sm_90a runs the Hopper path, compiled for the host once") {
  TempDir dir;
  const std::string cache = dir.path().string();
  const std::vector<std::string> args = {"run",        "--emulate", "--arch",     "sm_90a",
                                         "--heads",    "1",         "--seqlen-q", "130",
                                         "--head-dim", "128",       "--causal"};
  const ChildResult first = flashjit_cli(args, cache);
  REQUIRE_MESSAGE(first.exit_code == 0, first.output);
  CHECK(contains(first.out, "modelling sm_90a"));
  CHECK(contains(
      first.out,
      "kernel:  attention_forward.hdim128.bf16.window.br128.bc128.w12.s2.tma.overlap.pingpong."
      "persistent.sm90a "
      "(heuristic default)"));
  CHECK(contains(first.out, "PASS"));
  CHECK_MESSAGE(count_lines_with(first.err, kCompiling) == 1, first.err);
  CHECK(count_lines_with(flashjit_cli(args, cache).err, kCompiling) == 0);

  // A Hopper config on the default sm_80 is refused, naming --config; an arch the emulator
  // does not model is refused by the flag's check.
  const ChildResult on_sm80 = flashjit_cli(
      {"run", "--emulate", "--head-dim", "128", "--config", "br128.bc64.w12.s2.tma"}, cache);
  CHECK(on_sm80.exit_code == 2);
  CHECK(contains(on_sm80.output, "sm_90a only"));
  const ChildResult sm90 = flashjit_cli({"run", "--emulate", "--arch", "sm_90"}, cache);
  CHECK(sm90.exit_code != 0);
  CHECK(contains(sm90.output, "--arch"));
}

TEST_CASE("run --emulate --op attention-backward --config at head dim 72: compiled, then cached") {
  TempDir dir;
  const std::string cache = dir.path().string();
  const std::vector<std::string> args =
      run_args({"--op", "attention-backward", "--config", "br32.bc32.w2.s1"});
  const ChildResult first = flashjit_cli(args, cache);
  REQUIRE_MESSAGE(first.exit_code == 0, first.output);
  CHECK(contains(first.out, "attention_backward.dkdv.hdim72.bf16.br32.bc32.w2.s1.atomic_dq.sm80"));
  CHECK(contains(first.out, "PASS"));
  // The forward's default (for O and LSE), then dK/dV; D and the dQ-convert kernel are built in.
  CHECK_MESSAGE(count_lines_with(first.err, kCompiling) == 2, first.err);

  const ChildResult second = flashjit_cli(args, cache);
  REQUIRE_MESSAGE(second.exit_code == 0, second.output);
  CHECK(contains(second.out, "PASS"));
  CHECK_MESSAGE(count_lines_with(second.err, kCompiling) == 0, second.err);
}

TEST_CASE("run --config that is not in the op's space: exit 2 naming --config and real ones") {
  TempDir dir;
  const ChildResult forward =
      flashjit_cli(run_args({"--config", "br64.bc64.w3.s9"}), dir.path().string());
  CHECK(forward.exit_code == 2);
  CHECK(contains(forward.err,
                 "'--config': 'br64.bc64.w3.s9' is not a config of the space of "
                 "attention-forward bf16 hdim72"));
  CHECK(contains(forward.err, "br64.bc32.w4.s1"));
  // A forward name is not a backward config.
  const ChildResult backward = flashjit_cli(
      run_args({"--op", "attention-backward", "--config", "br64.bc32.w4.s1"}), dir.path().string());
  CHECK(backward.exit_code == 2);
  CHECK(contains(backward.err, "space of attention-backward"));
  CHECK(contains(backward.err, "br32.bc32.w2"));
  CHECK(count_lines_with(forward.err + backward.err, kCompiling) == 0);
}

TEST_CASE("autotune --emulate times configs the emulator was not built with") {
  TempDir dir;
  const ChildResult tuned = flashjit_cli(
      {"autotune", "--emulate", "--head-dim", "72", "--seqlen", "128", "--batch-heads", "1",
       "--heads", "1", "--only", "br64.bc32.w4.s1", "--budget-ms", "1", "-j", "2"},
      dir.path().string());
  REQUIRE_MESSAGE(tuned.exit_code == 0, tuned.output);
  // The default and the selected config, both built for the host and timed.
  CHECK_MESSAGE(count_lines_with(tuned.err, kCompiling) == 2, tuned.err);
  CHECK(count_lines_with(tuned.out, " ok") == 2);
  CHECK_FALSE(contains(tuned.out, "failed"));
}

TEST_CASE("info names the emulator's host compiler, or says why there is none") {
  TempDir dir;
  const ChildResult found = flashjit_cli({"info"}, dir.path().string());
  CHECK_MESSAGE(contains(found.out, "emulator:    any kernel, compiled by /"), found.output);
  const ChildResult missing =
      flashjit_cli({"info"}, dir.path().string(), {"FLASHJIT_HOST_CXX=/nonexistent/c++"});
  CHECK_MESSAGE(contains(missing.out,
                         "emulator:    built-in kernels only (FLASHJIT_HOST_CXX is "
                         "'/nonexistent/c++'"),
                missing.output);
}
