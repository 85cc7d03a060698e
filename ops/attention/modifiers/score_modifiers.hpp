#pragma once
// User score and mask modifiers (Attention::score_mod, Attention::mask_mod): checked as
// expressions, then rendered as the struct the kernels take as their Modifiers trait
// (attention/parts/modifiers.cuh says what the kernels do with it).
#include <string>
#include <vector>

#include "flashjit/attention.hpp"

namespace flashjit::kernels {

/// What the kernel knows of a capture (Attention::captures): not its data or sizes, so new
/// values run the same kernel.
struct CaptureType {
  std::string name;
  DType dtype = DType::f32;
  int rank = 1;
  bool grad = false;  ///< the backward adds its gradient (Capture::grad)
  bool operator==(const CaptureType&) const = default;
};

/// A call's modifiers, as the caller wrote them, and whether its probabilities are dropped
/// (Attention::dropout_p > 0: the kernels' Modifiers struct says so; empty: none of these).
struct ScoreModifiers {
  std::string score;                    ///< Attention::score_mod
  std::string mask;                     ///< Attention::mask_mod
  std::vector<CaptureType> captures{};  ///< the tensors they read, in the caller's order
  bool dropout = false;                 ///< Attention::dropout_p > 0

  bool empty() const { return score.empty() && mask.empty() && !dropout; }
  /// 16 hex digits that name these modifiers in kernel names and keys (empty when none).
  std::string digest() const;
  /// The C++ type the kernels' traits name: "flashjit::NoModifiers", or
  /// "flashjit_user::Modifiers_<digest>".
  std::string type_name() const;
  /// The struct definition added to the kernel's translation unit ("" when none): the
  /// expressions under #line directives naming them, so a compile error points at
  /// "attention.score_mod" or "attention.mask_mod" and the column in the caller's text; each
  /// capture opened as a CaptureView under its name (attention/parts/captures.cuh).
  std::string definition() const;

  bool operator==(const ScoreModifiers&) const = default;
};

/// Checks the modifiers of `attention`: each must be one expression of the modifier grammar
/// (attention/modifiers/modifier_grammar.hpp) over its own names and the call's captures, at most
/// 4096 characters. Throws InvalidArgument naming "attention.score_mod" or "attention.mask_mod" and
/// the first character outside the grammar; and checks the captures (check_captures in
/// attention/modifiers/attention_captures.hpp). validate_attention calls it.
void check_score_modifiers(const Attention& attention);

/// The modifiers of a validated call (check_score_modifiers has seen them), as the kernels'
/// specs take them.
ScoreModifiers score_modifiers(const Attention& attention);

}  // namespace flashjit::kernels
