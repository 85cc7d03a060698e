// The `flashjit` command end to end: exit codes, info, compile twice, cache verbs, run.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "flashjit/device.hpp"
#include "support/kernel_fixtures.hpp"
#include "support/modifier_expressions.hpp"
#include "support/temp_dir.hpp"

using flashjit::testing::ChildResult;
using flashjit::testing::count_lines_with;
using flashjit::testing::every_function_mask_mod;
using flashjit::testing::every_function_score_mod;
using flashjit::testing::flashjit_cli;
using flashjit::testing::line_value;
using flashjit::testing::TempDir;

TEST_CASE("info reports the versions, the GPU or why there is none, and the cache") {
  TempDir dir;
  ChildResult result = flashjit_cli({"info"}, dir.path().string());
  CHECK_MESSAGE(result.exit_code == 0, result.output);
  CHECK(result.output.find("nvrtc:") != std::string::npos);
  CHECK(result.output.find(dir.path().string()) != std::string::npos);
  if (flashjit::query_system().devices.empty()) {
    const bool says_why = result.output.find("no CUDA driver") != std::string::npos ||
                          result.output.find("no GPU") != std::string::npos;
    CHECK_MESSAGE(says_why, result.output);
  }
}

TEST_CASE(
    "compile --emit-ptx writes each kernel's PTX and refuses a path that cannot be a directory") {
  TempDir dir;
  const std::string cache = (dir.path() / "cache").string();
  const std::filesystem::path ptx = dir.path() / "ptx" / "nested";
  ChildResult result = flashjit_cli(
      {"compile", "--arch", "sm_90a", "--op", "softmax", "--emit-ptx", ptx.string()}, cache);
  REQUIRE_MESSAGE(result.exit_code == 0, result.output);
  const std::size_t kernels = count_lines_with(result.output, "softmax.");
  REQUIRE(kernels > 0);
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(ptx)) {
    CHECK(entry.path().extension() == ".ptx");
    CHECK(entry.path().filename().string().starts_with("softmax."));
    std::ifstream in(entry.path());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(text.find(".target sm_90a") != std::string::npos);
    CHECK(text.find(".entry ") != std::string::npos);
    ++files;
  }
  CHECK(files == kernels);
  CHECK(result.output.find("wrote the PTX of " + std::to_string(kernels) + " kernels") !=
        std::string::npos);

  // A file where the directory would go: exit 2 naming the flag, nothing compiled.
  const std::filesystem::path file = dir.path() / "a-file";
  std::ofstream(file) << "x";
  ChildResult bad = flashjit_cli(
      {"compile", "--arch", "sm_90a", "--op", "softmax", "--emit-ptx", file.string()}, cache);
  CHECK(bad.exit_code == 2);
  CHECK(bad.output.find("--emit-ptx") != std::string::npos);
  CHECK(count_lines_with(bad.output, "softmax.") == 0);
}

TEST_CASE("compile --match compiles only the kernels whose names contain one of its texts") {
  TempDir dir;
  const std::string cache = (dir.path() / "cache").string();
  ChildResult result =
      flashjit_cli({"compile", "--arch", "sm_90a", "--op", "softmax", "--match", "fp32.cols128.",
                    "--match", "bf16.colsany."},
                   cache);
  REQUIRE_MESSAGE(result.exit_code == 0, result.output);
  CHECK(count_lines_with(result.output, "softmax.") == 2);
  CHECK(count_lines_with(result.output, "softmax.fp32.cols128.") == 1);
  CHECK(count_lines_with(result.output, "softmax.bf16.colsany.") == 1);

  // A text no kernel's name holds: exit 2 naming the flag, nothing compiled.
  ChildResult none = flashjit_cli(
      {"compile", "--arch", "sm_90a", "--op", "softmax", "--match", "no-such-kernel"}, cache);
  CHECK(none.exit_code == 2);
  CHECK(none.output.find("--match") != std::string::npos);
  CHECK(count_lines_with(none.output, "softmax.") == 0);
}

TEST_CASE("compile twice: the second run finds every kernel cached") {
  TempDir dir;
  const std::string cache = (dir.path() / "cache").string();
  ChildResult first = flashjit_cli({"compile", "--arch", "sm_90a", "--op", "softmax"}, cache);
  REQUIRE_MESSAGE(first.exit_code == 0, first.output);
  const std::size_t kernels = count_lines_with(first.output, "softmax.");
  CHECK(kernels > 0);
  CHECK(count_lines_with(first.output, "  cached") == 0);
  CHECK(first.output.find("regs") != std::string::npos);
  // Every kernel line shows its shared memory as launched and its CTAs per SM.
  CHECK(count_lines_with(first.output, "ctas/SM") == kernels);

  ChildResult second = flashjit_cli({"compile", "--arch", "sm_90a", "--op", "softmax"}, cache);
  REQUIRE_MESSAGE(second.exit_code == 0, second.output);
  CHECK(count_lines_with(second.output, "  cached") == kernels);
  CHECK(second.output.find("0 compiled, " + std::to_string(kernels) + " cached") !=
        std::string::npos);

  ChildResult list = flashjit_cli({"cache", "list"}, cache);
  CHECK(list.exit_code == 0);
  CHECK(list.output.find(std::to_string(kernels) + " entries") != std::string::npos);
  CHECK(flashjit_cli({"cache", "verify"}, cache).output.find("0 invalid") != std::string::npos);
  ChildResult prune = flashjit_cli({"cache", "prune", "--max-size", "0"}, cache);
  CHECK_MESSAGE(prune.exit_code == 0, prune.output);
  CHECK(prune.output.find("removed " + std::to_string(kernels)) != std::string::npos);
  CHECK(flashjit_cli({"cache", "clear"}, cache).exit_code == 0);
}

TEST_CASE("bad usage exits 2 with the problem on stderr") {
  TempDir dir;
  const std::string cache = dir.path().string();
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{},
                                             {"frobnicate"},
                                             {"compile", "--arch", "sm_75"},
                                             {"compile", "--arch", "sm_90a", "--op", "nope"},
                                             {"cache", "prune", "--max-size", "lots"},
                                             {"cache", "prune"}}) {
    ChildResult result = flashjit_cli(args, cache);
    CHECK_MESSAGE(result.exit_code == 2, result.output);
    CHECK_MESSAGE(result.err.starts_with("flashjit: error: "), result.err);
  }
  CHECK(flashjit_cli({"--help"}, cache).exit_code == 0);
  CHECK(flashjit_cli({"run", "--help"}, cache).out.find("--splits") != std::string::npos);
}

TEST_CASE("cache prune and verify keep what they must and remove what they must") {
  TempDir dir;
  const std::string cache = dir.path().string();
  std::filesystem::path entry;
  {
    flashjit::detail::KernelCache writer(flashjit::testing::cache_options(cache));
    writer.get(flashjit::testing::sample_spec(0));
    writer.get(flashjit::testing::sample_spec(1));
    entry = writer.disk()->list().front().path;
  }
  SUBCASE("a size past 64 bits is refused, naming it, and nothing is removed") {
    for (const std::string& size :
         {std::string("17179869184G"), std::string("18446744073709551616"),
          std::string("99999999999999999999T"), "1" + std::string(400, '0')}) {
      const ChildResult prune = flashjit_cli({"cache", "prune", "--max-size", size}, cache);
      CAPTURE(size);
      CHECK_MESSAGE(prune.exit_code == 2, prune.output);
      CHECK(prune.err.find("--max-size") != std::string::npos);
      CHECK(prune.err.find("too large") != std::string::npos);
    }
    CHECK(std::filesystem::exists(entry));
    const ChildResult fits = flashjit_cli({"cache", "prune", "--max-size", "16383P"}, cache);
    CHECK_MESSAGE(fits.exit_code == 2, fits.output);  // P is no unit
    const ChildResult largest = flashjit_cli({"cache", "prune", "--max-size", "16383G"}, cache);
    CHECK_MESSAGE(largest.exit_code == 0, largest.output);
    CHECK(largest.out.find("removed 0 ") != std::string::npos);
  }
  SUBCASE("verify reports and removes an arch directory others can write") {
    ::chmod(entry.parent_path().c_str(), 0777);
    const ChildResult verify = flashjit_cli({"cache", "verify"}, cache);
    CHECK_MESSAGE(verify.exit_code == 0, verify.output);
    CHECK(verify.out.find("2 entries checked, 2 invalid (removed)") != std::string::npos);
    CHECK(count_lines_with(verify.out, "writable by other users") == 2);
    CHECK_FALSE(std::filesystem::exists(entry.parent_path()));
  }
  SUBCASE("verify reports and removes a directory with an entry's name") {
    std::filesystem::remove(entry);
    std::filesystem::create_directory(entry);
    const ChildResult verify = flashjit_cli({"cache", "verify"}, cache);
    CHECK_MESSAGE(verify.exit_code == 0, verify.output);
    CHECK(verify.out.find("2 entries checked, 1 invalid (removed)") != std::string::npos);
    CHECK(verify.out.find("not a regular file") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(entry));
  }
}

TEST_CASE("usage errors name what was typed and what is accepted, on stderr, exit 2") {
  TempDir dir;
  const std::string cache = dir.path().string();
  struct Case {
    std::vector<std::string> args;
    std::string named;
  };
  for (const Case& c : std::vector<Case>{
           {{"bogus"}, "unknown command 'bogus'; the commands are info, run"},
           {{"cache", "bogus"}, "unknown command 'bogus'; the commands are list, verify, prune"},
           {{}, "a command is required: info, run"},
           {{"cache"}, "list, verify, prune or clear"},
           {{"run", "--seqlen-k", "99999999999"}, "'--seqlen-k': is 99999999999"},
           {{"run", "--seqlen-q", "1", "--seqlen-k", "2000000000"}, "'--seqlen-k'"},
           {{"run", "--seqlen-q", "5000000", "--heads", "64"}, "'--seqlen-q'"},  // memory
           {{"run", "--seed", "-1"}, "--seed"},
           {{"run", "--seed", "18446744073709551616"}, "--seed"},
           {{"autotune", "--plan", "--arch", "sm_90a", "--head-dim", "7"}, "'--head-dim'"},
           {{"autotune", "--plan", "--arch", "sm_90a", "--seqlen", "0"}, "'--seqlen'"},
       }) {
    const ChildResult result = flashjit_cli(c.args, cache);
    CAPTURE(result.output);
    CHECK(result.exit_code == 2);
    CHECK(result.err.find(c.named) != std::string::npos);
    CHECK(result.out.empty());  // nothing printed before the error
  }
}

TEST_CASE("a bad tuning database or policy is reported on stderr with a non-zero exit") {
  TempDir dir;
  const std::string cache = dir.path().string();
  const std::string bad = (dir.path() / "bad.json").string();
  std::ofstream(bad) << "garbage";
  const ChildResult show = flashjit_cli({"autotune", "show", "--db", bad}, cache);
  CHECK_MESSAGE(show.exit_code == 1, show.output);
  CHECK(show.err.find("not valid JSON") != std::string::npos);
  CHECK(show.out.find("not valid JSON") == std::string::npos);
  // info still reports everything else, and says what is wrong with the environment.
  const ChildResult info = flashjit_cli({"info"}, cache, {"FLASHJIT_TUNING=bogus"});
  CHECK_MESSAGE(info.exit_code == 1, info.output);
  CHECK(info.out.find("nvrtc:") != std::string::npos);
  CHECK(info.out.find("cache:") != std::string::npos);
  CHECK(info.out.find("policy unusable") != std::string::npos);
  CHECK(info.err.find("'FLASHJIT_TUNING': 'bogus'") != std::string::npos);
}

TEST_CASE("compile without --arch and without a GPU fails with exit 1 and says why") {
  if (!flashjit::query_system().devices.empty()) return;  // a GPU supplies the arch
  TempDir dir;
  ChildResult result = flashjit_cli({"compile"}, dir.path().string());
  CHECK(result.exit_code == 1);
  CHECK(result.output.find("--arch") != std::string::npos);
}

TEST_CASE("bench --first-result --arch without a GPU: the kernel's time, and the host paths") {
  if (!flashjit::query_system().devices.empty()) return;  // a GPU times the whole call
  TempDir dir;
  ChildResult result =
      flashjit_cli({"bench", "--first-result", "--arch", "sm_80", "--head-dim", "64", "--batch",
                    "8", "--heads", "32", "--heads-kv", "4", "--seqlen", "4096"},
                   dir.path().string());
  REQUIRE_MESSAGE(result.exit_code == 0, result.output);
  CHECK(line_value(result.output, "kernel_ready_ms") > 0);
  // The host work of a cached call, dense and decoding (about 0.8 and 1.3 µs on the
  // development machine): a bound loose enough for a loaded CI machine, tight enough to fail on
  // a per-call allocation, file read or synchronisation. AddressSanitizer's Debug build (the
  // `sanitize` preset) checks every access: 26 and 45 µs there.
#if defined(__SANITIZE_ADDRESS__)
  constexpr double kBoundUs = 200;
#else
  constexpr double kBoundUs = 20;
#endif
  const double dense = line_value(result.output, "host_path_us");
  const double decode = line_value(result.output, "decode_host_path_us");
  CHECK_MESSAGE((dense > 0 && dense < kBoundUs), result.output);
  CHECK_MESSAGE((decode > 0 && decode < kBoundUs), result.output);
}

TEST_CASE("bench --dtype e4m3 and --config: the fp8 backward, fp32 and unknown configs refused") {
  TempDir dir;
  const ChildResult backward =
      flashjit_cli({"bench", "--op", "attention-backward", "--dtype", "e4m3"}, dir.path().string());
  CHECK(backward.exit_code == 2);
  CHECK_MESSAGE(backward.output.find("--dtype") != std::string::npos, backward.output);
  CHECK_MESSAGE(backward.output.find("no backward") != std::string::npos, backward.output);
  const ChildResult fp32 =
      flashjit_cli({"bench", "--op", "attention-forward", "--dtype", "f32"}, dir.path().string());
  CHECK(fp32.exit_code == 2);
  CHECK_MESSAGE(fp32.output.find("e4m3: the fp8 forward") != std::string::npos, fp32.output);
  // --config: a name of the op's space (checked before the GPU is looked for).
  const ChildResult unknown = flashjit_cli(
      {"bench", "--op", "attention-forward", "--dtype", "e4m3", "--config", "br1.bc1.w1.s1"},
      dir.path().string());
  CHECK(unknown.exit_code == 2);
  CHECK_MESSAGE(unknown.output.find("br128.bc64.w8.s2.fp8") != std::string::npos, unknown.output);
}

TEST_CASE("run --emulate: an attention forward on the emulator passes against the reference") {
  TempDir dir;
  ChildResult result = flashjit_cli(
      {"run", "--emulate", "--seqlen-q", "70", "--seqlen-k", "100", "--heads", "2", "--causal"},
      dir.path().string());
  CHECK_MESSAGE(result.exit_code == 0, result.output);
  const std::string first_line = result.output.substr(0, result.output.find('\n'));
  CHECK_MESSAGE(first_line.find("CPU emulator") != std::string::npos, result.output);
  CHECK(result.output.find("seqlen_q 70, seqlen_k 100") != std::string::npos);
  CHECK(result.output.find("relative L2 error") != std::string::npos);
  CHECK(result.output.find("PASS") != std::string::npos);
}

TEST_CASE("run --counters: the emulator's work against the problem's minimum, both ops") {
  TempDir dir;
  for (const char* op : {"attention-forward", "attention-backward"}) {
    for (const bool causal : {false, true}) {
      std::vector<std::string> args = {"run",        "--emulate",  "--counters", "--op", op,
                                       "--seqlen-q", "128",        "--seqlen-k", "192",  "--heads",
                                       "2",          "--heads-kv", "1"};
      if (causal) args.push_back("--causal");
      const ChildResult run = flashjit_cli(args, dir.path().string());
      CAPTURE(run.output);
      REQUIRE(run.exit_code == 0);
      CHECK(run.out.find("PASS") != std::string::npos);
      for (const char* name : {"tensor_flops", "shared_bytes_read", "shared_bytes_written",
                               "global_bytes_read", "global_bytes_written", "barriers", "ctas"}) {
        CHECK_MESSAGE(line_value(run.out, name) > 0, name);
      }
      // No kernel does less than the problem needs: every useful FLOP and byte at least once.
      CHECK(line_value(run.out, "tensor_flops_ratio") >= 1.0);
      CHECK(line_value(run.out, "global_bytes_ratio") >= 1.0);
      CHECK(line_value(run.out, "shared_bytes_per_tensor_flop") > 0);
    }
  }
}

TEST_CASE("run --deterministic: the backward's own dQ kernel, two more products than atomic dQ") {
  TempDir dir;
  double flops[2] = {0, 0};
  for (const bool deterministic : {false, true}) {
    std::vector<std::string> args = {
        "run",        "--emulate", "--counters", "--op", "attention-backward",
        "--seqlen-q", "128",       "--heads",    "1"};
    if (deterministic) args.push_back("--deterministic");
    const ChildResult run = flashjit_cli(args, dir.path().string());
    CAPTURE(run.output);
    REQUIRE(run.exit_code == 0);
    CHECK(run.out.find("PASS") != std::string::npos);
    const bool own_dq = run.out.find("attention_backward.dq.hdim64") != std::string::npos;
    const bool converts = run.out.find("attention_backward.dq_convert") != std::string::npos;
    CHECK(own_dq == deterministic);
    CHECK(converts == !deterministic);
    flops[deterministic ? 1 : 0] = line_value(run.out, "tensor_flops");
  }
  // Whole tiles at 128 x 128: five products of 128 x 128 x 64 against seven.
  const double product = 2.0 * 128 * 128 * 64;
  CHECK(flops[0] == 5 * product);
  CHECK(flops[1] == 7 * product);

  const ChildResult forward = flashjit_cli(
      {"run", "--emulate", "--deterministic", "--seqlen-q", "16"}, dir.path().string());
  CHECK(forward.exit_code == 2);
  CHECK_MESSAGE(forward.err.find("--deterministic") != std::string::npos, forward.err);
}

TEST_CASE("run without a GPU falls back to the emulator and says so on its first line") {
  if (!flashjit::query_system().devices.empty()) return;
  TempDir dir;
  ChildResult result = flashjit_cli(
      {"run", "--seqlen-q", "33", "--head-dim", "32", "--dtype", "fp16", "--layout", "bhsd"},
      dir.path().string());
  CHECK_MESSAGE(result.exit_code == 0, result.output);
  const std::string first_line = result.output.substr(0, result.output.find('\n'));
  CHECK_MESSAGE(first_line.find("CPU emulator") != std::string::npos, result.output);
}

TEST_CASE("run with bad options exits 2 and names the problem") {
  TempDir dir;
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"run", "--dtype", "fp32"},
                                             {"run", "--dtype", "int8"},
                                             {"run", "--head-dim", "12"},
                                             {"run", "--heads", "3", "--heads-kv", "2"},
                                             {"run", "--layout", "sbhd"},
                                             {"run", "--batch", "0"},
                                             {"run", "--seqlen-q", "0"},
                                             {"run", "--seqlen-q=x"},
                                             {"run", "--heads"},
                                             {"run", "--frobnicate"}}) {
    ChildResult result = flashjit_cli(args, dir.path().string());
    CAPTURE(args.back());
    CHECK_MESSAGE(result.exit_code == 2, result.output);
    CHECK_MESSAGE(result.err.starts_with("flashjit: error: "), result.err);
    CHECK(result.out.empty());
  }
}

TEST_CASE("run refuses, by name, an option the chosen op or form does not use, before running") {
  TempDir dir;
  struct Case {
    std::vector<std::string> flags;
    std::string refused;
    std::string run;  // the run the message says the option does not apply to
  };
  for (const Case& c : std::vector<Case>{
           {{"--splits", "4"}, "--splits", "--op attention-forward, dense"},
           {{"--op", "layer-norm", "--causal"}, "--causal", "--op layer-norm"},
           {{"--op", "layer-norm", "--heads", "2"}, "--heads", "--op layer-norm"},
           {{"--op", "softmax", "--causal"}, "--causal", "--op softmax"},
           {{"--op", "softmax", "--rms"}, "--rms", "--op softmax"},
           {{"--op", "merge-states", "--paged"}, "--paged", "--op merge-states"},
           {{"--op", "merge-states", "--varlen", "2"}, "--varlen", "--op merge-states"},
           {{"--op", "multiscale", "--partials", "2"}, "--partials", "multiscale"},
           {{"--varlen", "3", "--batch", "2"}, "--batch", "--varlen"},
           {{"--paged", "--layout", "bshd"}, "--layout", "--paged"},
           {{"--page-size", "32"}, "--page-size", "dense"},
           {{"--seqused"}, "--seqused", "dense"},
           {{"--values-in-keys"}, "--values-in-keys", "dense"},
           {{"--paged", "--append", "1", "--values-in-keys"}, "--values-in-keys", "--append"},
           {{"--op", "attention-backward", "--varlen", "2", "--counters"},
            "--counters",
            "--varlen"},
           {{"--op", "attention-backward", "--varlen", "2", "--splits", "2"},
            "--splits",
            "--varlen"},
           {{"--mask", "tensor"}, "--mask", "dense"},
           {{"--rows", "8"}, "--rows", "dense"},
           {{"--deterministic"}, "--deterministic", "--op attention-forward"},
       }) {
    std::vector<std::string> args = {"run", "--emulate"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    const ChildResult run = flashjit_cli(args, dir.path().string());
    CAPTURE(run.output);
    CHECK(run.exit_code == 2);
    CHECK(run.err.starts_with("flashjit: error: invalid argument '" + c.refused +
                              "': does not apply to "));
    CHECK(run.err.find(c.run) != std::string::npos);
    CHECK(run.err.find("; it applies to ") != std::string::npos);
    CHECK(run.out.empty());  // refused before anything ran
  }
}

TEST_CASE("a mistyped option or command gets the nearest name, an unrelated one gets none") {
  TempDir dir;
  struct Case {
    std::vector<std::string> args;
    std::string said;
  };
  for (const Case& c : std::vector<Case>{
           {{"run", "--emualte"}, "unknown option '--emualte'; did you mean '--emulate'?"},
           {{"run", "--seqlen_q", "4"}, "unknown option '--seqlen_q'; did you mean '--seqlen-q'?"},
           {{"run", "--head-dim=72", "--cuasal"},
            "unknown option '--cuasal'; did you mean '--causal'?"},
           {{"compile", "--ach", "sm_80"}, "unknown option '--ach'; did you mean '--arch'?"},
           {{"rnu"}, "unknown command 'rnu' (did you mean 'run'?); the commands are info, run"},
           {{"run", "--frobnicate"}, "unknown option '--frobnicate'\n"},
       }) {
    const ChildResult result = flashjit_cli(c.args, dir.path().string());
    CAPTURE(result.output);
    CHECK(result.exit_code == 2);
    CHECK(result.err.starts_with("flashjit: error: " + c.said));
    CHECK(result.out.empty());
  }
}

TEST_CASE("dense, paged and varlen runs print the shape the same way") {
  TempDir dir;
  const std::vector<std::string> shape = {"run",        "--emulate", "--seqlen-q", "1",
                                          "--seqlen-k", "40",        "--heads",    "2",
                                          "--heads-kv", "1",         "--causal"};
  const auto shape_line = [&](const std::vector<std::string>& flags) {
    std::vector<std::string> args = shape;
    args.insert(args.end(), flags.begin(), flags.end());
    const ChildResult run = flashjit_cli(args, dir.path().string());
    CAPTURE(run.output);
    CHECK(run.exit_code == 0);
    const std::size_t at = run.out.find("shape:   ");
    REQUIRE(at != std::string::npos);
    return run.out.substr(at, run.out.find('\n', at) - at);
  };
  const std::string dense = shape_line({});
  CHECK(dense ==
        "shape:   batch 1, heads 2 (kv 1), seqlen_q 1, seqlen_k 40, head_dim 64, bf16, bshd, "
        "causal");
  CHECK(shape_line({"--paged"}) == dense + ", paged (pages of 16 keys)");
  const std::string varlen = shape_line({"--varlen", "3"});
  CHECK(varlen.starts_with("shape:   batch 3, heads 2 (kv 1), seqlen_q [1,0,"));
  CHECK(varlen.find(", head_dim 64, bf16, bshd, causal, packed (varlen)") != std::string::npos);
}

TEST_CASE("run --paged and --varlen: the inference forward and the varlen backward, PASS") {
  TempDir dir;
  const std::vector<std::vector<std::string>> runs = {
      {"--paged", "--page-size", "16", "--seqlen-q", "1", "--seqlen-k", "1000", "--heads", "32",
       "--heads-kv", "4"},
      {"--varlen", "5"},
      {"--op", "attention-backward", "--varlen", "4", "--seqlen-q", "40", "--causal"},
      {"--varlen", "4", "--seqused", "--causal"},
      {"--op", "attention-backward", "--varlen", "3", "--seqlen-q", "40", "--seqused"}};
  for (const std::vector<std::string>& flags : runs) {
    std::vector<std::string> args = {"run", "--emulate"};
    args.insert(args.end(), flags.begin(), flags.end());
    const ChildResult run = flashjit_cli(args, dir.path().string());
    CAPTURE(run.output);
    REQUIRE(run.exit_code == 0);
    CHECK(run.out.find("kernel:  attention_forward.") != std::string::npos);
    CHECK(run.out.find(".varlen") != std::string::npos);
    CHECK(run.out.find("PASS") != std::string::npos);
    if (std::find(flags.begin(), flags.end(), "--seqused") != flags.end()) {  // the fill ran
      CHECK(run.out.find("padded past the used rows (seqused)") != std::string::npos);
      CHECK(run.out.find("kernel:  attention_unused_rows.") != std::string::npos);
    }
  }
  // MLA's absorbed decoding on one-token pages, v a view of k's first 512 columns: the wide
  // kernel, reading the keys once; a dense run stops at 256 and says where wider heads run.
  const ChildResult mla =
      flashjit_cli({"run", "--emulate", "--paged", "--page-size", "1", "--seqlen-q", "1",
                    "--seqlen-k", "77", "--heads", "16", "--heads-kv", "1", "--head-dim", "576",
                    "--head-dim-v", "512", "--values-in-keys"},
                   dir.path().string());
  CAPTURE(mla.output);
  CHECK(mla.exit_code == 0);
  CHECK(mla.out.find(".wide.hdv512.g2.vk.varlen.paged.packgqa") != std::string::npos);
  CHECK(mla.out.find("V in the keys") != std::string::npos);
  CHECK(mla.out.find("PASS") != std::string::npos);
  const ChildResult dense_576 =
      flashjit_cli({"run", "--emulate", "--head-dim", "576"}, dir.path().string());
  CHECK(dense_576.exit_code == 2);
  CHECK(dense_576.err.find("'--head-dim'") != std::string::npos);
  CHECK(dense_576.err.find("to 576 with --paged or --varlen") != std::string::npos);
  const ChildResult paged =
      flashjit_cli({"run", "--emulate", "--paged", "--seqlen-q", "1", "--seqlen-k", "300",
                    "--heads", "8", "--heads-kv", "1", "--splits", "3"},
                   dir.path().string());
  // The decode kernel, which merges its splits in the same launch: no merge_states after it.
  CHECK(paged.out.find(".decode.varlen.paged.packgqa.split") != std::string::npos);
  CHECK(paged.out.find("kernel:  merge_states.") == std::string::npos);
  // Appending one key with rotary to a cache of one-token pages: the append kernel runs first.
  const ChildResult append = flashjit_cli(
      {"run", "--emulate", "--paged", "--page-size", "1", "--seqlen-q", "1", "--seqlen-k", "777",
       "--heads", "32", "--heads-kv", "8", "--append", "1", "--rotary"},
      dir.path().string());
  CAPTURE(append.output);
  CHECK(append.exit_code == 0);
  CHECK(append.out.find("paged (pages of 1 keys), appending 1 keys, rotary (half)") !=
        std::string::npos);
  CHECK(append.out.find("kernel:  attention_kvcache_append.bf16.rope_half") != std::string::npos);
  CHECK(append.out.find("PASS") != std::string::npos);
  // Packed queries appending to a dense cache, rotated and causal (FlashAttention 3's varlen q).
  const ChildResult packed =
      flashjit_cli({"run", "--emulate", "--append", "2", "--varlen", "3", "--seqlen-q", "5",
                    "--seqlen-k", "30", "--rotary", "--causal"},
                   dir.path().string());
  CAPTURE(packed.output);
  CHECK(packed.exit_code == 0);
  CHECK(packed.out.find("kernel:  attention_kvcache_append.bf16.rope_half") != std::string::npos);
  CHECK(packed.out.find("PASS") != std::string::npos);
  for (const std::vector<std::string>& bad : {std::vector<std::string>{"--rotary", "--paged"},
                                              {"--append", "300", "--seqlen-k", "200"},
                                              {"--append", "1", "--rotary", "--rotary-interleaved"},
                                              {"--paged", "--op", "attention-backward"},
                                              {"--varlen", "2", "--config", "br64.bc32.w4.s1"}}) {
    std::vector<std::string> args = {"run", "--emulate"};
    args.insert(args.end(), bad.begin(), bad.end());
    const ChildResult run = flashjit_cli(args, dir.path().string());
    CHECK_MESSAGE(run.exit_code == 2, run.output);
  }
}

TEST_CASE("run --sinks: learnable sinks forward and backward against float64, PASS") {
  TempDir dir;
  for (const char* op : {"attention-forward", "attention-backward"}) {
    const ChildResult run =
        flashjit_cli({"run", "--emulate", "--op", op, "--sinks", "--heads", "4", "--heads-kv", "2",
                      "--seqlen-q", "40", "--seqlen-k", "56", "--head-dim", "64", "--causal"},
                     dir.path().string());
    CAPTURE(run.output);
    CHECK(run.exit_code == 0);
    CHECK(run.out.find("learnable sinks") != std::string::npos);
    CHECK(run.out.find("PASS") != std::string::npos);
    const bool backward = std::string(op) == "attention-backward";
    CHECK((run.out.find("dsinks:") != std::string::npos) == backward);
  }
  const ChildResult paged =
      flashjit_cli({"run", "--emulate", "--sinks", "--paged"}, dir.path().string());
  CHECK(paged.exit_code == 2);
  CHECK(paged.output.find("'--sinks'") != std::string::npos);
}

TEST_CASE("run --dropout: dropout forward and backward against float64 with the same mask") {
  TempDir dir;
  for (const char* op : {"attention-forward", "attention-backward"}) {
    const ChildResult run =
        flashjit_cli({"run", "--emulate", "--op", op, "--dropout", "0.2", "--seed", "5", "--heads",
                      "2", "--seqlen-q", "40", "--seqlen-k", "56", "--head-dim", "64"},
                     dir.path().string());
    const ChildResult varlen =
        flashjit_cli({"run", "--emulate", "--op", op, "--dropout", "0.2", "--varlen", "3",
                      "--seqlen-q", "30", "--seqlen-k", "40", "--head-dim", "64"},
                     dir.path().string());
    CAPTURE(varlen.output);
    CHECK(varlen.exit_code == 0);
    CHECK(varlen.out.find("PASS") != std::string::npos);
    CAPTURE(run.output);
    CHECK(run.exit_code == 0);
    CHECK(run.out.find("dropout 0.2") != std::string::npos);
    CHECK(run.out.find("PASS") != std::string::npos);
  }
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--dropout", "1"}, {"--dropout", "0.1", "--paged"}}) {
    std::vector<std::string> args = {"run", "--emulate"};
    args.insert(args.end(), bad.begin(), bad.end());
    const ChildResult run = flashjit_cli(args, dir.path().string());
    CHECK_MESSAGE(run.exit_code == 2, run.output);
    CHECK(run.output.find("'--dropout'") != std::string::npos);
  }
}

TEST_CASE("run --score-mod/--mask-mod: the float64 reference evaluates the same text, PASS") {
  TempDir dir;
  // A dense forward, and a variable-length backward whose ∂score_mod/∂score comes from the
  // kernels' dual numbers and, for the reference, from the same text on float64 dual numbers
  // (the paged forward and the dense backward take modifiers through the same code: their own
  // suites run them).
  const std::string alibi = "score - 0.0625f * (h + 1) * (q_idx - kv_idx)";
  const std::string bent = "4.0f * tanhf(score / 4.0f) - 0.01f * h * kv_idx";
  for (const std::vector<std::string>& form :
       {std::vector<std::string>{"--score-mod", alibi, "--seqlen-q", "70", "--seqlen-k", "90",
                                 "--causal"},
        {"--score-mod", bent, "--op", "attention-backward", "--varlen", "3", "--seqlen-q", "40",
         "--seqlen-k", "40", "--deterministic"}}) {
    std::vector<std::string> args = {"run", "--emulate", "--mask-mod", "(kv_idx + b) % 5 != 2"};
    args.insert(args.end(), form.begin(), form.end());
    const ChildResult run = flashjit_cli(args, dir.path().string());
    CAPTURE(run.output);
    CHECK(run.exit_code == 0);
    CHECK(run.out.find(".mod") != std::string::npos);
    CHECK(run.out.find("PASS") != std::string::npos);
  }
  // A mask the reference evaluates differently from the kernel would fail: here the two agree
  // only because they read the same text; a program is refused before anything compiles.
  const ChildResult bad =
      flashjit_cli({"run", "--emulate", "--score-mod", "score; 1"}, dir.path().string());
  CHECK(bad.exit_code == 2);
  CHECK(bad.output.find("'--score-mod'") != std::string::npos);
  const ChildResult wrong =
      flashjit_cli({"run", "--emulate", "--mask-mod", "no_such_name"}, dir.path().string());
  CHECK(wrong.exit_code == 2);
  CHECK(wrong.output.find("no_such_name") != std::string::npos);
  // In the grammar but not C++ for a float score: the host compiler's error, exit 1.
  const ChildResult uncompiled =
      flashjit_cli({"run", "--emulate", "--score-mod", "score % 2"}, dir.path().string());
  CHECK(uncompiled.exit_code == 1);
  CHECK(uncompiled.output.find("--score-mod") != std::string::npos);
  CHECK(uncompiled.output.find("score % 2") != std::string::npos);
}

TEST_CASE("run --score-mod/--mask-mod: every function of the grammar, forward and backward, PASS") {
  // The emulator's host compiler builds the kernel and the float64 reference from the same
  // functions (attention/parts/modifier_functions.cuh) as NVRTC does; the backward on dual numbers.
  TempDir dir;
  for (const char* op : {"attention-forward", "attention-backward"}) {
    const ChildResult run = flashjit_cli(
        {"run", "--emulate", "--op", op, "--score-mod", every_function_score_mod(), "--mask-mod",
         every_function_mask_mod(), "--seqlen-q", "40", "--seqlen-k", "40", "--heads", "2"},
        dir.path().string());
    CAPTURE(run.output);
    CHECK(run.exit_code == 0);
    CHECK(run.out.find("PASS") != std::string::npos);
  }
}

TEST_CASE("run --score-mod/--mask-mod: host calls, traps and shells are refused, nothing runs") {
  // Each of these ran on the host when the emulator compiled what a character check let
  // through (abort: exit 134; the trap: SIGILL; exit(7); system() started /bin/sh).
  TempDir dir;
  const std::vector<std::string> shape = {"--seqlen-q", "16", "--seqlen-k", "16",
                                          "--heads",    "1",  "--head-dim", "64"};
  for (const std::string& hostile :
       {std::string("(abort(), score)"), std::string("(__builtin_trap(), score)"),
        std::string("(exit(7), score)"), std::string("score + (system(0) != 0 ? 100.0f : 0.0f)"),
        std::string("score\t+ 1")}) {
    for (const char* option : {"--score-mod", "--mask-mod"}) {
      std::vector<std::string> args = {"run", "--emulate", option, hostile};
      args.insert(args.end(), shape.begin(), shape.end());
      const ChildResult run = flashjit_cli(args, dir.path().string());
      CAPTURE(hostile);
      CAPTURE(run.output);
      CHECK(run.exit_code == 2);
      CHECK(run.output.find(std::string("invalid argument '") + option + "'") != std::string::npos);
      CHECK(run.out.find("PASS") == std::string::npos);
    }
  }
}

TEST_CASE("run --op merge-states: key splits merged on the emulator, the errors and PASS") {
  TempDir dir;
  for (const char* dtype : {"bf16", "fp32"}) {
    const ChildResult run =
        flashjit_cli({"run", "--emulate", "--op", "merge-states", "--partials", "5", "--seqlen-q",
                      "16", "--seqlen-k", "100", "--causal", "--dtype", dtype},
                     dir.path().string());
    CAPTURE(run.output);
    REQUIRE(run.exit_code == 0);
    CHECK(run.out.find("5 partials of 16 tokens") != std::string::npos);
    CHECK(run.out.find("kernel:  merge_states.fp32.to" + std::string(dtype)) != std::string::npos);
    CHECK(run.out.find("O:       max abs error") != std::string::npos);
    CHECK(run.out.find("LSE:     max abs error") != std::string::npos);
    CHECK(run.out.find("PASS") != std::string::npos);
  }
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--partials", "0"}, {"--config", "t32.c4"}, {"--rows", "5"}}) {
    std::vector<std::string> args = {"run", "--emulate", "--op", "merge-states"};
    args.insert(args.end(), bad.begin(), bad.end());
    const ChildResult run = flashjit_cli(args, dir.path().string());
    CHECK_MESSAGE(run.exit_code == 2, run.output);
    CHECK_MESSAGE(run.err.find(bad.front()) != std::string::npos, run.err);
  }
}

TEST_CASE("run --op layer-norm: forward and backward on the emulator, the errors and PASS") {
  TempDir dir;
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--dtype", "bf16", "--bias", "--residual"},
        {"--dtype", "fp32", "--rms", "--cols", "4097", "--rows", "3"}}) {
    std::vector<std::string> args = {"run", "--emulate", "--op", "layer-norm"};
    args.insert(args.end(), flags.begin(), flags.end());
    const ChildResult run = flashjit_cli(args, dir.path().string());
    CAPTURE(run.output);
    REQUIRE(run.exit_code == 0);
    CHECK(run.out.find("kernel:  layer_norm.") != std::string::npos);
    CHECK(run.out.find("  y: ok rel_l2") != std::string::npos);
    CHECK(run.out.find("  dx: ok rel_l2") != std::string::npos);
    CHECK(run.out.find("  dgamma: ok rel_l2") != std::string::npos);
    CHECK(run.out.find("PASS") != std::string::npos);
  }
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--cols", "65537"}, {"--dtype", "fp8"}, {"--head-dim", "64"}}) {
    std::vector<std::string> args = {"run", "--emulate", "--op", "layer-norm"};
    args.insert(args.end(), bad.begin(), bad.end());
    const ChildResult run = flashjit_cli(args, dir.path().string());
    CHECK_MESSAGE(run.exit_code == 2, run.output);
    CHECK_MESSAGE(run.err.find(bad.front()) != std::string::npos, run.err);
  }
}

TEST_CASE(
    "run --op softmax: strided rows on the emulator, the error and PASS, and bad input exits 2") {
  TempDir dir;
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{}, {"--dtype", "fp32", "--cols", "5000", "--rows", "3"}}) {
    std::vector<std::string> args = {"run", "--emulate", "--op", "softmax"};
    args.insert(args.end(), flags.begin(), flags.end());
    const ChildResult run = flashjit_cli(args, dir.path().string());
    CAPTURE(run.output);
    REQUIRE(run.exit_code == 0);
    CHECK(run.out.find("kernel:  softmax.") != std::string::npos);
    CHECK(run.out.find("y:       max abs error ") != std::string::npos);
    CHECK(run.out.find("PASS: matches the float64 reference") != std::string::npos);
  }
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--rows", "1000000"}, {"--dtype", "fp8"}, {"--heads", "2"}}) {
    std::vector<std::string> args = {"run", "--emulate", "--op", "softmax"};
    args.insert(args.end(), bad.begin(), bad.end());
    const ChildResult run = flashjit_cli(args, dir.path().string());
    CHECK_MESSAGE(run.exit_code == 2, run.output);
    CHECK_MESSAGE(run.err.find(bad.front()) != std::string::npos, run.err);
    CHECK(run.out.empty());  // refused before the backend line
  }
}

// One arch and one row-length bucket: test_ops compiles every default for both (this is the
// command's report).
TEST_CASE("compile --op layer-norm --match: one bucket's defaults compile for sm_80, no spills") {
  TempDir dir;
  const std::string cache = (dir.path() / "cache").string();
  for (const char* arch : {"sm_80"}) {
    const ChildResult compile = flashjit_cli({"compile", "--arch", arch, "--op", "layer-norm",
                                              "--match", ".cols256.", "--match", "_param_grad."},
                                             cache);
    REQUIRE_MESSAGE(compile.exit_code == 0, compile.output);
    CHECK(count_lines_with(compile.output, "layer_norm.") > 0);
    CHECK(count_lines_with(compile.output, "layer_norm_backward.") > 0);
    CHECK(count_lines_with(compile.output, "layer_norm_param_grad.") == 3);
    CHECK(count_lines_with(compile.output, ".cols1024.") == 0);  // --match keeps one bucket
    CHECK(count_lines_with(compile.output, "spill    0 B") ==
          count_lines_with(compile.output, "spill "));
    CHECK(compile.output.find(" 0 failed") != std::string::npos);
  }
}

// The persistent sm_90a forward: 140 query tiles (140 heads of one 128-row block) on H100's 132
// SMs, so 8 CTAs walk two tiles; the result is checked against the float64 reference.
TEST_CASE("run --emulate --arch sm_90a: 140 tiles on at most 132 persistent CTAs, PASS") {
  TempDir dir;
  const ChildResult run =
      flashjit_cli({"run", "--emulate", "--arch", "sm_90a", "--heads", "140", "--seqlen-q", "128",
                    "--seqlen-k", "128", "--head-dim", "64", "--counters"},
                   dir.path().string());
  REQUIRE_MESSAGE(run.exit_code == 0, run.output);
  CHECK(run.output.find(".tma.overlap.pingpong.persistent.sm90a") != std::string::npos);
  CHECK(count_lines_with(run.output, "ctas                          132") == 1);
  CHECK(run.output.find("PASS") != std::string::npos);
}

TEST_CASE("run --op multiscale: both masks on the emulator, the errors and PASS") {
  TempDir dir;
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--seqlen-q", "70", "--seqlen-k", "90", "--heads", "4",
                                 "--heads-kv", "2"},
        {"--mask", "tensor", "--batch", "2", "--seqlen-q", "40", "--dtype", "fp16"}}) {
    std::vector<std::string> args = {"run", "--emulate", "--op", "multiscale"};
    args.insert(args.end(), flags.begin(), flags.end());
    const ChildResult run = flashjit_cli(args, dir.path().string());
    CAPTURE(run.output);
    REQUIRE(run.exit_code == 0);
    CHECK(run.out.find("kernels: multiscale_forward.") != std::string::npos);
    for (const char* output : {"O:", "r:", "dQ:", "dK:", "dV:"}) {
      CHECK(run.out.find(std::string("\n") + output) != std::string::npos);
    }
    CHECK((run.out.find("\ndM:") != std::string::npos) == (flags[1] == "tensor"));
    CHECK(run.out.find("PASS") != std::string::npos);
  }
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--mask", "causal"}, {"--head-dim", "100"}, {"--causal"}}) {
    std::vector<std::string> args = {"run", "--emulate", "--op", "multiscale"};
    args.insert(args.end(), bad.begin(), bad.end());
    const ChildResult run = flashjit_cli(args, dir.path().string());
    CHECK_MESSAGE(run.exit_code == 2, run.output);
    CHECK_MESSAGE(run.err.find(bad.front()) != std::string::npos, run.err);
  }
}

TEST_CASE("run --head-dim-v: MLA's 192 and 128, forward and backward, PASS, out of range named") {
  TempDir dir;
  for (const char* op : {"attention-forward", "attention-backward"}) {
    const ChildResult run = flashjit_cli(
        {"run", "--emulate", "--op", op, "--head-dim", "192", "--head-dim-v", "128", "--causal"},
        dir.path().string());
    CAPTURE(run.output);
    CHECK(run.exit_code == 0);
    CHECK(run.out.find("head_dim 192, bf16, bshd, causal, head_dim_v 128") != std::string::npos);
    CHECK(run.out.find("PASS") != std::string::npos);
  }
  const ChildResult wide = flashjit_cli(
      {"run", "--emulate", "--head-dim", "64", "--head-dim-v", "72"}, dir.path().string());
  CHECK(wide.exit_code == 2);
  CHECK(wide.output.find("'--head-dim-v': is 72") != std::string::npos);
  // An append of one key with its value 32 wide into a paged cache, rotated, PASS.
  const ChildResult append =
      flashjit_cli({"run", "--emulate", "--append", "1", "--seqlen-q", "1", "--seqlen-k", "40",
                    "--paged", "--page-size", "3", "--head-dim-v", "32", "--rotary"},
                   dir.path().string());
  CAPTURE(append.output);
  CHECK(append.exit_code == 0);
  CHECK(append.out.find("appending 1 keys, rotary (half), head_dim_v 32") != std::string::npos);
  CHECK(append.out.find("PASS") != std::string::npos);
}

TEST_CASE(
    "run --kv-dtype e4m3: decoding on one-token pages, its bound stated, PASS, misuse named") {
  TempDir dir;
  const ChildResult run = flashjit_cli(
      {"run", "--emulate", "--paged", "--page-size", "1", "--seqlen-q", "1", "--seqlen-k", "200",
       "--heads", "8", "--heads-kv", "2", "--kv-dtype", "e4m3", "--counters"},
      dir.path().string());
  CAPTURE(run.output);
  CHECK(run.exit_code == 0);
  CHECK(run.out.find("e4m3 cache (descale per head)") != std::string::npos);
  CHECK(run.out.find(".kv_e4m3.sm80") != std::string::npos);
  CHECK(run.out.find("against attention over the dequantized e4m3 cache") != std::string::npos);
  CHECK(run.out.find("PASS") != std::string::npos);
  // Appending into the fp8 cache: the new rows arrive as codes, rotated and rounded to e4m3.
  const ChildResult append =
      flashjit_cli({"run", "--emulate", "--paged", "--page-size", "4", "--seqlen-q", "1",
                    "--seqlen-k", "60", "--kv-dtype", "e4m3", "--append", "1", "--rotary"},
                   dir.path().string());
  CAPTURE(append.output);
  CHECK(append.exit_code == 0);
  CHECK(append.out.find("attention_kvcache_append.bf16.rope_half.kv_e4m3") != std::string::npos);
  CHECK(append.out.find("PASS") != std::string::npos);
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--kv-dtype", "e5m2"},
        {"--kv-dtype", "e4m3", "--op", "attention-backward"}}) {
    std::vector<std::string> args = {"run", "--emulate"};
    args.insert(args.end(), bad.begin(), bad.end());
    const ChildResult refused = flashjit_cli(args, dir.path().string());
    CHECK_MESSAGE(refused.exit_code == 2, refused.output);
    CHECK_MESSAGE(refused.err.find("--kv-dtype") != std::string::npos, refused.err);
  }
}
