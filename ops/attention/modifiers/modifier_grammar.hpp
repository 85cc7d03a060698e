#pragma once
// The language of score and mask modifiers (Attention::score_mod, Attention::mask_mod): a
// grammar every expression is parsed against before any compiler sees it, on every backend.
// What it accepts is a whitelist of tokens and names, so the text a compiler gets can only
// compute a number from the call's indices, its captures and a fixed set of math functions:
// no call into the host or device runtime, no declaration, no statement, no preprocessor.
//
//   expression  := logical_or [ '?' expression ':' expression ]
//   logical_or  := logical_and { '||' logical_and }      (then && | ^ &, == !=, < <= > >=,
//   ...                                                    << >>, + -, * / %: C++'s precedence)
//   unary       := ( '-' | '+' | '!' | '~' ) unary | primary
//   primary     := number | 'true' | 'false' | variable | capture '[' expression ']' ...
//                | function '(' expression { ',' expression } ')' | '(' expression ')'
//
// variable: score (score_mod only), b, h, q_idx, kv_idx. capture: a name of
// Attention::captures, indexed once per dimension. function: the list in
// attention/parts/modifier_functions.cuh (and kModifierFunctions), float(...) and int(...). number:
// a decimal int, or a float with an optional exponent and f suffix. Spaces only separate.
#include <string>
#include <string_view>
#include <vector>

namespace flashjit::kernels {

/// A capture as an expression sees it: its name and how many indices it takes.
struct CaptureName {
  std::string name;
  int rank = 1;
};

/// What an expression may name besides the fixed vocabulary.
struct ModifierScope {
  bool has_score = true;              ///< score_mod reads `score`; mask_mod does not
  std::vector<CaptureName> captures;  ///< Attention::captures, in the caller's order
};

/// A function a modifier may call and how many arguments it takes.
struct ModifierFunction {
  std::string_view name;
  int arity;
};

/// Every function a modifier may call, casts included (docs/modifiers.md lists them).
const std::vector<ModifierFunction>& modifier_functions();

/// Whether `name` is a C++ keyword or a word of the grammar (a function, a cast, true/false):
/// no capture may take it.
bool is_reserved_word(std::string_view name);

/// Parses `text` as one expression of the grammar above within `scope`. Throws
/// InvalidArgument naming `field` ("attention.score_mod", ...) and the first character
/// outside the grammar, with what was expected there.
void check_modifier_grammar(const std::string& field, std::string_view text,
                            const ModifierScope& scope);

}  // namespace flashjit::kernels
