// `flashjit autotune` end to end without a GPU: the refusal with nothing written, --plan on
// sm_90a for head dims 64 and 128 (real NVRTC resource reports), tuning on the emulator with
// its table and database, `autotune show`, and `info` counting the entries.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "api/runtime_parts.hpp"
#include "attention/attention_tuning.hpp"
#include "autotune/candidates.hpp"
#include "autotune/tuning_db.hpp"
#include "autotune/tuning_state.hpp"
#include "cli_runner.hpp"
#include "common/op_registry.hpp"
#include "flashjit/device.hpp"
#include "flashjit/runtime.hpp"
#include "support/temp_dir.hpp"

using flashjit::testing::ChildResult;
using flashjit::testing::contains;
using flashjit::testing::count_lines_with;
using flashjit::testing::flashjit_cli;
using flashjit::testing::TempDir;

TEST_CASE("autotune without a GPU: exit 1, says why and what works, writes nothing") {
  if (!flashjit::query_system().devices.empty()) return;  // the GPU suite tunes for real
  TempDir dir;
  const ChildResult result = flashjit_cli({"autotune", "--head-dim", "64"}, dir.path().string());
  CHECK_MESSAGE(result.exit_code == 1, result.output);
  CHECK(contains(result.output, "there is none here"));
  CHECK(contains(result.output, "--plan --arch sm_90a"));
  CHECK(contains(result.output, "nothing was written"));
  CHECK_FALSE(std::filesystem::exists(dir.path() / "v1" / "tuning"));
}

// Head dim 64's configs that show each verdict (the compile matrix's test compiles the Hopper
// space at head dim 128 already, and CI has 2 cores): --only keeps the plan to them and the
// default.
TEST_CASE("autotune --plan on sm_90a lists the candidates of head dim 64 with reasons") {
  TempDir dir;
  const ChildResult result = flashjit_cli(
      {"autotune", "--plan", "--arch", "sm_90a", "--head-dim", "64", "--seqlen", "4096", "-j", "2",
       "--only", "br64.bc32.w4.s1,br64.bc128.w4.s1,br128.bc64.w12.s2.tma,br8.bc8.w1.s1"},
      dir.path().string());
  REQUIRE_MESSAGE(result.exit_code == 0, result.output);
  CHECK(contains(result.output, "== plan: attention-forward bf16 hdim64 seqlen 4096"));
  CHECK(count_lines_with(result.output, "(default)") == 1);
  // A config that spills on sm_90a (pruned on the report), one with a ptxas performance
  // advisory (at head dim 64 the small TMA tiles need fewer registers than setmaxnreg expects at
  // entry, and ptxas ignores it: C7508), a candidate; a name the space lacks is said so.
  CHECK(contains(result.output, "br64.bc128.w4.s1 "));
  CHECK(count_lines_with(result.output, "pruned: spills") == 1);
  CHECK(count_lines_with(result.output, "pruned: ptxas advisory in forward: C7508") == 1);
  CHECK(count_lines_with(result.output, "  candidate") >= 1);
  CHECK(count_lines_with(result.output, "br8.bc8.w1.s1") == 1);
  CHECK(contains(result.output, "not a config of this problem (--only)"));
  CHECK(contains(result.output, "not selected by --only)"));
  CHECK(count_lines_with(result.output, "regs") <= 4);  // the three and the default, no others
  // No tuning database without timing.
  CHECK_FALSE(std::filesystem::exists(dir.path() / "v1" / "tuning"));
}

TEST_CASE("autotune --plan: short sequences prune tiles larger than the problem") {
  TempDir dir;
  const ChildResult result =
      flashjit_cli({"autotune", "--plan", "--arch", "sm_90a", "--head-dim", "64", "--seqlen", "48"},
                   dir.path().string());
  REQUIRE_MESSAGE(result.exit_code == 0, result.output);
  CHECK(count_lines_with(result.output, "pruned: Br 128 > 64 query rows") > 0);
}

TEST_CASE("autotune --score-mod: the modifiers' kernels and key, a bad expression named") {
  TempDir dir;
  const ChildResult plan =
      flashjit_cli({"autotune", "--plan", "--arch", "sm_90a", "--head-dim", "64", "--seqlen", "48",
                    "--score-mod", "score * 0.5f", "-j", "2"},
                   dir.path().string());
  REQUIRE_MESSAGE(plan.exit_code == 0, plan.output);
  CHECK(contains(plan.output, "hdim64 seqlen 48 batch 2 x heads 16 modifiers "));
  CHECK(count_lines_with(plan.output, "(default)") == 1);
  CHECK(count_lines_with(plan.output, ".tma") > 0);  // the TMA forward takes modifiers
  CHECK(count_lines_with(plan.output, ".wgmma") == 0);
  const ChildResult bad = flashjit_cli(
      {"autotune", "--plan", "--arch", "sm_90a", "--score-mod", "score; x"}, dir.path().string());
  CHECK(bad.exit_code == 2);
  CHECK(contains(bad.err, "invalid argument '--score-mod'"));
  const ChildResult decode = flashjit_cli(
      {"autotune", "--plan", "--arch", "sm_90a", "--op", "attention-decode", "--mask-mod", "true"},
      dir.path().string());
  CHECK(decode.exit_code == 2);
  CHECK(contains(decode.err, "invalid argument '--mask-mod': does not apply to --op"));
}

// --warm: a training job's kernels (the forward and the backward's delta, dK/dV and dQ convert
// kernels of the default configs) compiled into an empty cache, then found there by a second
// process; sm_80's kernels keep it to seconds on CI's 2 cores.
TEST_CASE("autotune --warm compiles a shape's forward and backward kernels, then finds them") {
  TempDir dir;
  const std::vector<std::string> args = {
      "autotune",   "--warm", "--arch",   "sm_80", "--op", "attention-forward,attention-backward",
      "--head-dim", "64",     "--seqlen", "256",   "-j",   "2"};
  const ChildResult cold = flashjit_cli(args, dir.path().string());
  REQUIRE_MESSAGE(cold.exit_code == 0, cold.output);
  CHECK(count_lines_with(cold.output, "== warm: attention-forward bf16 hdim64 seqlen 256") == 1);
  CHECK(count_lines_with(cold.output, "== warm: attention-backward bf16 hdim64 seqlen 256") == 1);
  CHECK(count_lines_with(cold.output, "attention_forward.hdim64.bf16.") == 1);
  CHECK(count_lines_with(cold.output, "attention_backward.") >= 2);  // dK/dV and its helpers
  CHECK(contains(cold.output, " 0 cached, 0 failed"));
  const ChildResult warm = flashjit_cli(args, dir.path().string());
  REQUIRE_MESSAGE(warm.exit_code == 0, warm.output);
  CHECK(contains(warm.output, ": 0 compiled, "));
  CHECK(count_lines_with(warm.output, " cached") >= 3);
  const ChildResult both =
      flashjit_cli({"autotune", "--warm", "--plan", "--arch", "sm_80"}, dir.path().string());
  CHECK(both.exit_code == 2);
  CHECK(contains(both.output, "--warm"));
  // What only tuning reads is refused by name, not silently ignored.
  const ChildResult timed = flashjit_cli(
      {"autotune", "--warm", "--arch", "sm_80", "--budget-ms", "50"}, dir.path().string());
  CHECK(timed.exit_code == 2);
  CHECK(contains(timed.output, "--budget-ms"));
  CHECK(contains(timed.output, "--warm does not"));
}

TEST_CASE("autotune bad usage exits 2 naming the option") {
  TempDir dir;
  const ChildResult no_arch = flashjit_cli({"autotune", "--plan"}, dir.path().string());
  CHECK(no_arch.exit_code == 2);
  CHECK(contains(no_arch.output, "--arch"));
  const ChildResult bad_op = flashjit_cli(
      {"autotune", "--plan", "--arch", "sm_90a", "--op", "softmax"}, dir.path().string());
  CHECK(bad_op.exit_code == 2);
  CHECK(contains(bad_op.output, "--op"));
  const ChildResult bad_causal = flashjit_cli(
      {"autotune", "--plan", "--arch", "sm_90a", "--causal", "maybe"}, dir.path().string());
  CHECK(bad_causal.exit_code == 2);
  CHECK(contains(bad_causal.output, "--causal"));
}

TEST_CASE("autotune --op takes every tuned op of the registry, and refuses the others by name") {
  TempDir dir;
  const ChildResult help = flashjit_cli({"autotune", "--help"}, dir.path().string());
  REQUIRE(help.exit_code == 0);
  const ChildResult bad_op = flashjit_cli(
      {"autotune", "--plan", "--arch", "sm_90a", "--op", "softmax"}, dir.path().string());
  for (const std::string& op : flashjit::kernels::tuned_op_names()) {
    CAPTURE(op);
    CHECK(contains(help.out, op));
    CHECK(contains(bad_op.err, op));  // the message lists what the autotuner tunes
  }
}

TEST_CASE("autotune refuses, by name, an option none of the chosen ops reads, before any work") {
  TempDir dir;
  struct Case {
    std::vector<std::string> flags;
    std::string refused;
    std::string readers;  // the ops the message says read it
  };
  for (const Case& c : std::vector<Case>{
           {{"--op", "layer-norm", "--causal", "true"}, "--causal", "attention-forward"},
           {{"--rows", "8"}, "--rows", "layer-norm"},
           {{"--deterministic"}, "--deterministic", "attention-backward"},
           {{"--op", "multiscale-forward", "--queries", "2"}, "--queries", "attention-decode"},
           {{"--op", "layer-norm-backward", "--residual"}, "--residual", "--op layer-norm"},
           {{"--op", "attention-decode", "--batch-heads", "8"}, "--batch-heads", "multiscale"},
       }) {
    std::vector<std::string> args = {"autotune", "--plan", "--arch", "sm_90a"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    const ChildResult run = flashjit_cli(args, dir.path().string());
    CAPTURE(run.output);
    CHECK(run.exit_code == 2);
    CHECK(run.err.starts_with("flashjit: error: invalid argument '" + c.refused +
                              "': does not apply to --op "));
    CHECK(contains(run.err, "; it applies to "));
    CHECK(contains(run.err.substr(run.err.find("; it applies to ")), c.readers));
    CHECK(run.out.empty());  // refused before any plan was printed
  }
}

TEST_CASE("autotune --emulate: a table with the winner marked, then show and info see it") {
  TempDir dir;
  const std::string cache = dir.path().string();
  const ChildResult tuned = flashjit_cli(
      {"autotune", "--emulate", "--head-dim", "64", "--seqlen", "128", "--batch-heads", "2",
       "--heads", "2", "--only", "br64.bc64.w4.s1", "--budget-ms", "1", "-j", "2"},
      cache);
  REQUIRE_MESSAGE(tuned.exit_code == 0, tuned.output);
  CHECK(contains(tuned.output, "on the CPU emulator"));
  CHECK(count_lines_with(tuned.output, "TFLOP/s") == 1);
  CHECK(count_lines_with(tuned.output, "(default)") == 1);
  CHECK(count_lines_with(tuned.output, "* br") == 1);  // exactly one winner
  CHECK(contains(tuned.output, "database: " + cache));

  const ChildResult shown = flashjit_cli({"autotune", "show"}, cache);
  REQUIRE_MESSAGE(shown.exit_code == 0, shown.output);
  CHECK(contains(shown.output, "1 entries"));
  CHECK(contains(shown.output, "attention-forward/"));
  CHECK(contains(shown.output, "br64.bc64.w4.s1"));

  const ChildResult info = flashjit_cli({"info"}, cache);
  REQUIRE_MESSAGE(info.exit_code == 0, info.output);
  if (flashjit::query_system().devices.empty()) {
    CHECK(contains(info.output, "(1 databases, 1 entries)"));
  }
  CHECK(contains(info.output, "policy cached"));
}

TEST_CASE(
    "autotune --op attention-decode: the split counts in GB/s, on the emulator and in --plan") {
  TempDir dir;
  const std::string cache = dir.path().string();
  const std::vector<std::string> shape = {
      "--op", "attention-decode", "--head-dim", "64",       "--heads", "4",         "--heads-kv",
      "1",    "--batch",          "2",          "--seqlen", "128",     "--queries", "1"};
  std::vector<std::string> tune = {
      "autotune", "--emulate", "--budget-ms", "1", "-j", "2", "--only", "br64.bc64.w4.s2.splits2"};
  tune.insert(tune.end(), shape.begin(), shape.end());
  const ChildResult tuned = flashjit_cli(tune, cache);
  REQUIRE_MESSAGE(tuned.exit_code == 0, tuned.output);
  CHECK(contains(tuned.output,
                 "attention-decode bf16 hdim64 batch 2 x 1 queries, context 128, "
                 "heads 4:1, pages of 16"));
  CHECK(count_lines_with(tuned.output, "GB/s") == 1);
  CHECK(count_lines_with(tuned.output, "(default)") == 1);
  // Two sequences of 128 keys fill no GPU, but a split needs two key blocks: the default has 1.
  INFO(tuned.output);
  CHECK(count_lines_with(tuned.output, "  ok") == 2);  // the two timed, each checked
  CHECK(count_lines_with(tuned.output, "ok (default)") == 1);
  CHECK(count_lines_with(tuned.output, "* br") == 1);
  const ChildResult shown = flashjit_cli({"autotune", "show"}, cache);
  CHECK(contains(shown.output, "/paged16/q1/k128/b2/hkv1/g4"));

  std::vector<std::string> plan = {"autotune", "--plan", "--arch", "sm_90a", "-j", "2"};
  plan.insert(plan.end(), shape.begin(), shape.end());
  const ChildResult planned = flashjit_cli(plan, cache);
  REQUIRE_MESSAGE(planned.exit_code == 0, planned.output);
  CHECK(count_lines_with(planned.output, "pruned: splits") > 0);  // more splits than key blocks
  CHECK(count_lines_with(planned.output, "pruned: Br 128 > 4 query rows") > 0);
  CHECK(count_lines_with(planned.output, ".splits2 ") > 0);

  plan.push_back("--queries");
  plan.push_back("17");
  const ChildResult too_many = flashjit_cli(plan, cache);
  CHECK(too_many.exit_code == 2);
  CHECK(contains(too_many.output, "--queries"));
}

TEST_CASE("run names the kernel a tuning database chose, and a winner it cannot run falls back") {
  TempDir dir;
  const std::string cache = dir.path().string();
  // The entry of `flashjit run --emulate`'s default shape, written as a tuning would.
  auto store_winner = [&](const std::string& winner) {
    flashjit::testing::ScopedEnv cache_env("FLASHJIT_CACHE_DIR", cache.c_str());
    flashjit::Runtime emulator(flashjit::RuntimeOptions{.backend = flashjit::Backend::emulator});
    flashjit::kernels::AttentionProblem p(false, flashjit::DType::bf16, {});
    p.attention.heads_q = p.attention.heads_kv = 4;
    p.attention.seqlen_q = p.attention.seqlen_k = 256;
    p.attention.head_dim = 64;
    const std::string fallback =
        flashjit::autotune::TunedConfig(p.default_config(emulator.device().arch())).name();
    REQUIRE(fallback != winner);
    flashjit::autotune::TuningEntry entry;
    entry.default_config = fallback;
    entry.candidates = {{fallback, 2.0, "ok"}, {winner, 1.0, "ok"}};
    entry.winner = winner;
    flashjit::autotune::merge_into_file(flashjit::detail::tuning_of(emulator).database(),
                                        flashjit::detail::tuning_of(emulator).meta(),
                                        flashjit::autotune::tuning_key(p), entry);
  };
  SUBCASE("a winner the emulator has: run names it") {
    store_winner("br64.bc64.w4.s1");
    const ChildResult run = flashjit_cli({"run", "--emulate"}, cache);
    REQUIRE_MESSAGE(run.exit_code == 0, run.output);
    CHECK_MESSAGE(
        contains(run.output, "hdim64.bf16.br64.bc64.w4.s1.sm80 (tuned: from the tuning database)"),
        run.output);
  }
  SUBCASE(
      "a winner the emulator was not built with, and no host compiler: one warning, the "
      "default") {
    store_winner("br64.bc32.w4.s1");
    // Without a host compiler, the emulator runs only the configs it was built with.
    const ChildResult run =
        flashjit_cli({"run", "--emulate"}, cache, {"FLASHJIT_HOST_CXX=/nonexistent/c++"});
    REQUIRE_MESSAGE(run.exit_code == 0, run.output);
    CHECK_MESSAGE(count_lines_with(run.output, "winner 'br64.bc32.w4.s1'") == 1, run.output);
    CHECK(contains(run.output,
                   "which flashjit CPU emulator cannot run; using the heuristic default"));
    CHECK(contains(run.output, "(heuristic default)"));
    CHECK(contains(run.output, "PASS"));
  }
  SUBCASE("a winner that is no config at all: one warning, the default") {
    store_winner("br4096.bc64.w4.s1");
    const ChildResult run = flashjit_cli({"run", "--emulate"}, cache);
    REQUIRE_MESSAGE(run.exit_code == 0, run.output);
    CHECK_MESSAGE(count_lines_with(run.output, "winner 'br4096.bc64.w4.s1'") == 1, run.output);
    CHECK(contains(run.output, "PASS"));
  }
}

TEST_CASE(
    "autotune --op layer-norm: GB/s on the emulator, and --plan prunes buckets by row length") {
  TempDir dir;
  const std::string cache = dir.path().string();
  std::vector<std::string> tune = {"autotune", "--emulate", "--budget-ms",  "1",    "-j",
                                   "2",        "--only",    "cany.t512.v1", "--op", "layer-norm",
                                   "--rows",   "8",         "--cols",       "200",  "--rms"};
  const ChildResult tuned = flashjit_cli(tune, cache);
  REQUIRE_MESSAGE(tuned.exit_code == 0, tuned.output);
  INFO(tuned.output);
  CHECK(contains(tuned.output, "layer-norm bf16 8 rows x 200 cols, RMS norm"));
  CHECK(count_lines_with(tuned.output, "GB/s") == 1);
  CHECK(count_lines_with(tuned.output, "ok (default)") == 1);  // c256.t32.v8
  CHECK(count_lines_with(tuned.output, "  ok") == 2);          // the two timed, each checked
  CHECK(count_lines_with(tuned.output, "* c") == 1);           // exactly one winner
  const ChildResult shown = flashjit_cli({"autotune", "show"}, cache);
  CHECK(contains(shown.output, "/bf16/c256/r8/rms"));

  // 5000 columns: the 8192 bucket and the unbounded one hold them (their 8 configs are compiled
  // for sm_90a); the 8192 bucket's backwards all spill and are pruned.
  const ChildResult planned =
      flashjit_cli({"autotune", "--plan", "--arch", "sm_90a", "-j", "2", "--op",
                    "layer-norm-backward", "--rows", "4096", "--cols", "5000", "--bias"},
                   cache);
  REQUIRE_MESSAGE(planned.exit_code == 0, planned.output);
  CHECK(contains(planned.output,
                 "== plan: layer-norm-backward bf16 4096 rows x 5000 cols, "
                 "layer norm, dbias on sm_90a"));
  CHECK(count_lines_with(planned.output, "holds rows of at most") == 30);  // c256 to c4096
  CHECK(count_lines_with(planned.output, "pruned: spills") == 4);
  CHECK(contains(planned.output, "cany.t1024.v8"));
  CHECK(count_lines_with(planned.output, "(default)") == 1);
  CHECK(contains(planned.output, "4 of 38 configs would be timed"));

  // 300 columns: c256 cannot hold them, c1024 and up hold them with more room than c512.
  const ChildResult short_rows = flashjit_cli(
      {"autotune", "--plan", "--arch", "sm_90a", "-j", "2", "--op", "layer-norm", "--cols", "300"},
      cache);
  REQUIRE_MESSAGE(short_rows.exit_code == 0, short_rows.output);
  CHECK(count_lines_with(short_rows.out,
                         "pruned: c256 holds rows of at most 256 columns, "
                         "not 300") == 5);
  for (const auto& [bucket, configs] :
       {std::pair{"c1024", 7}, {"c2048", 6}, {"c4096", 5}, {"c8192", 4}}) {
    CAPTURE(bucket);
    CHECK(count_lines_with(short_rows.out, std::string("pruned: ") + bucket +
                                               " > c512, the smallest bucket that holds "
                                               "300") == configs);
  }

  const ChildResult bad_cols = flashjit_cli(
      {"autotune", "--plan", "--arch", "sm_90a", "--op", "layer-norm", "--cols", "0"}, cache);
  CHECK(bad_cols.exit_code == 2);
  CHECK(contains(bad_cols.output, "--cols"));
}

TEST_CASE(
    "autotune --op multiscale-forward and -backward: --plan per mask, --emulate with a winner") {
  TempDir dir;
  const std::string cache = dir.path().string();
  const std::vector<std::string> shape = {"--head-dim",    "32", "--seqlen", "64",
                                          "--batch-heads", "2",  "--heads",  "2"};
  std::vector<std::string> plan = {
      "autotune", "--plan", "--arch", "sm_90a",
      "-j",       "2",      "--op",   "multiscale-forward,multiscale-backward",
      "--mask",   "tensor"};
  plan.insert(plan.end(), shape.begin(), shape.end());
  const ChildResult planned = flashjit_cli(plan, cache);
  REQUIRE_MESSAGE(planned.exit_code == 0, planned.output);
  CHECK(contains(planned.output, "== plan: multiscale-forward bf16 hdim32 seqlen 64"));
  CHECK(contains(planned.output, "mask tensor on sm_90a"));
  CHECK(count_lines_with(planned.output, "(default)") == 2);
  CHECK(count_lines_with(planned.output, "pruned: Br 128 > 64 query rows") > 0);
  CHECK(contains(planned.output, "then the fastest dK/dV tile with the fastest dQ tile"));

  std::vector<std::string> tune = {
      "autotune", "--emulate", "--budget-ms",        "1",      "-j",
      "2",        "--op",      "multiscale-forward", "--only", "br64.bc32.w4.s1"};
  tune.insert(tune.end(), shape.begin(), shape.end());
  const ChildResult tuned = flashjit_cli(tune, cache);
  REQUIRE_MESSAGE(tuned.exit_code == 0, tuned.output);
  CHECK(count_lines_with(tuned.output, "TFLOP/s") == 1);
  CHECK(count_lines_with(tuned.output, "  ok") == 2);
  CHECK(contains(flashjit_cli({"autotune", "show"}, cache).output, "multiscale-forward/"));

  const ChildResult causal = flashjit_cli(
      {"autotune", "--plan", "--arch", "sm_90a", "--op", "multiscale-forward", "--causal", "true"},
      cache);
  CHECK(causal.exit_code == 2);
  CHECK(contains(causal.output, "--causal"));
}
