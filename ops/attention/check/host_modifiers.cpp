#include "attention/check/host_modifiers.hpp"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "attention/modifiers/score_modifiers.hpp"
#include "flashjit/error.hpp"
#include "runtime/file_io.hpp"
#include "runtime/host_compiler.hpp"
#include "runtime/shared_object.hpp"
#include "runtime/template_sources.hpp"

namespace flashjit::tools {
namespace {

namespace fs = std::filesystem;

/// The kernels' headers the translation unit includes: the dual numbers and what they use.
constexpr const char* kDualHeaders[] = {"attention/parts/modifier_functions.cuh",
                                        "attention/parts/dual_number.cuh", "tile/platform.cuh"};

/// The translation unit: one exported function per expression (true and the score itself where
/// there is none), in the kernel's argument types but a float64 score; and ∂score_mod/∂score,
/// the expression evaluated on the kernels' dual numbers in float64, as the backward's kernels
/// evaluate it in float32. The functions sit in namespace flashjit_user, as the kernels'
/// modifiers do, so the expression calls the same math functions.
std::string reference_source(const std::string& score_mod, const std::string& mask_mod) {
  const std::string unused = "(void)b, (void)h, (void)q_idx, (void)kv_idx;\n";
  const std::string score = score_mod.empty() ? "score" : score_mod;
  // Plain host code: not the emulator's kernel build, whose device API it does not need.
  return "#include <cmath>\n"
         "#undef FLASHJIT_EMULATOR\n"
         "#include \"attention/parts/modifier_functions.cuh\"\n"
         "#define FLASHJIT_EXPORT extern \"C\" __attribute__((visibility(\"default\")))\n"
         "namespace flashjit_user {\n"
         "FLASHJIT_EXPORT double flashjit_run_score(double score, int b, int h, int q_idx,\n"
         "                                          int kv_idx) {\n  " +
         unused + "  return static_cast<double>(" + score +
         ");\n}\n"
         "FLASHJIT_EXPORT double flashjit_run_score_slope(double score_value, int b, int h,\n"
         "                                                int q_idx, int kv_idx) {\n"
         "  const flashjit::Dual<double> score(score_value, 1.0);\n  " +
         unused + "  return static_cast<flashjit::Dual<double>>(" + score +
         ").slope;\n}\n"
         "FLASHJIT_EXPORT bool flashjit_run_mask(int b, int h, int q_idx, int kv_idx) {\n  " +
         unused + "  return static_cast<bool>(" + (mask_mod.empty() ? "true" : mask_mod) +
         ");\n}\n}  // namespace flashjit_user\n";
}

/// A scratch folder removed when it goes out of scope.
struct ScratchDir {
  fs::path path;
  ScratchDir() {
    static std::atomic<int> next{0};
    path = fs::temp_directory_path() /
           ("flashjit-run-modifiers-" + std::to_string(::getpid()) + "-" + std::to_string(next++));
    fs::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

}  // namespace

void check_modifier_options(const std::string& score_mod, const std::string& mask_mod) {
  Attention checked;
  checked.score_mod = score_mod;
  checked.mask_mod = mask_mod;
  try {
    kernels::check_score_modifiers(checked);
  } catch (const InvalidArgument& e) {
    const bool score = e.argument() == "attention.score_mod";
    const std::string message = e.what();  // "invalid argument '<name>': <problem>"
    throw InvalidArgument(score ? "--score-mod" : "--mask-mod",
                          message.substr(message.find("': ") + 3));
  }
}

HostModifiers compile_host_modifiers(const std::string& score_mod, const std::string& mask_mod) {
  if (score_mod.empty() && mask_mod.empty()) return {};
  check_modifier_options(score_mod, mask_mod);
  const detail::HostToolchainLookup lookup = detail::find_host_toolchain();
  if (!lookup.toolchain) {
    throw Error(ErrorKind::compile,
                "the float64 reference of --score-mod/--mask-mod is compiled "
                "for the host, and " +
                    lookup.problem + "; " + lookup.remedy);
  }
  const ScratchDir scratch;
  const fs::path source = scratch.path / "modifiers.cpp", object = scratch.path / "modifiers.so";
  std::ofstream(source) << reference_source(score_mod, mask_mod);
  const fs::path include = scratch.path / "include";
  for (const detail::TemplateFile& file : detail::embedded_templates()) {
    for (const char* name : kDualHeaders) {
      if (file.name != name) continue;
      fs::create_directories((include / name).parent_path());
      std::ofstream(include / name) << file.text;
    }
  }
  detail::compile_shared_object(*lookup.toolchain, source, {include}, {}, object,
                                "the --score-mod/--mask-mod reference");
  const std::optional<std::string> bytes = detail::read_whole_file(object);
  if (!bytes) throw Error(ErrorKind::compile, "could not read the compiled modifiers back");
  using Score = double (*)(double, int, int, int, int);
  using Mask = bool (*)(int, int, int, int);
  const auto score = reinterpret_cast<Score>(
      detail::load_shared_object(*bytes, "flashjit-run-modifiers", "flashjit_run_score"));
  const auto mask = reinterpret_cast<Mask>(
      detail::load_shared_object(*bytes, "flashjit-run-modifiers", "flashjit_run_mask"));
  const auto slope = reinterpret_cast<Score>(
      detail::load_shared_object(*bytes, "flashjit-run-modifiers", "flashjit_run_score_slope"));
  HostModifiers out;
  const auto i = [](std::int64_t x) { return static_cast<int>(x); };
  if (!score_mod.empty()) {
    out.score = [score, i](double s, std::int64_t b, std::int64_t h, std::int64_t q,
                           std::int64_t k) { return score(s, i(b), i(h), i(q), i(k)); };
    out.score_slope = [slope, i](double s, std::int64_t b, std::int64_t h, std::int64_t q,
                                 std::int64_t k) { return slope(s, i(b), i(h), i(q), i(k)); };
  }
  if (!mask_mod.empty()) {
    out.mask = [mask, i](std::int64_t b, std::int64_t h, std::int64_t q, std::int64_t k) {
      return mask(i(b), i(h), i(q), i(k));
    };
  }
  return out;
}

}  // namespace flashjit::tools
