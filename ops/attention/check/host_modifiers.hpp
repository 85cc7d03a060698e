#pragma once
// `flashjit run --score-mod/--mask-mod`: the caller's modifier expressions compiled for the host
// so the float64 reference evaluates the same text the kernel compiles (a float64 score, the
// kernel's int indices).
#include <cstdint>
#include <functional>
#include <string>

namespace flashjit::tools {

struct HostModifiers {
  std::function<double(double, std::int64_t, std::int64_t, std::int64_t, std::int64_t)> score;
  /// ∂score/∂score: the expression on the kernels' dual numbers, in float64 (the backward's
  /// reference; an independent derivative is the tests' job, not the command's).
  std::function<double(double, std::int64_t, std::int64_t, std::int64_t, std::int64_t)> score_slope;
  std::function<bool(std::int64_t, std::int64_t, std::int64_t, std::int64_t)> mask;
};

/// Checks the expressions as Attention::score_mod and mask_mod are checked
/// (kernels::check_score_modifiers, with no capture), the InvalidArgument naming "--score-mod"
/// or "--mask-mod" instead.
void check_modifier_options(const std::string& score_mod, const std::string& mask_mod);

/// check_modifier_options, then compiles them with the host C++ compiler the
/// emulator uses into functions of (score, b, h, q_idx, kv_idx) and (b, h, q_idx, kv_idx), and
/// the score's slope; an empty text gives empty functions. Throws Error{compile} with the
/// compiler's log when the text does not compile, or when there is no host compiler (saying how to
/// provide one).
HostModifiers compile_host_modifiers(const std::string& score_mod, const std::string& mask_mod);

}  // namespace flashjit::tools
