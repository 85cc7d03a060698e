#include "attention/modifiers/score_modifiers.hpp"

#include "attention/attention_common.hpp"
#include "attention/modifiers/attention_captures.hpp"
#include "attention/modifiers/modifier_grammar.hpp"
#include "flashjit/error.hpp"
#include "runtime/hashing.hpp"

namespace flashjit::kernels {
namespace {

constexpr std::size_t kMaxLength = 4096;

/// Throws unless `text` is one expression of the modifier grammar (modifier_grammar.hpp)
/// within `scope`; the length first, so the parser never sees a long text.
void check_expression(const char* name, const std::string& text, const ModifierScope& scope) {
  if (text.size() > kMaxLength) {
    throw InvalidArgument(name, "is " + std::to_string(text.size()) + " characters, over " +
                                    std::to_string(kMaxLength));
  }
  if (text.find_first_not_of(' ') == std::string::npos) {
    throw InvalidArgument(name, "is blank; leave it empty for no modifier");
  }
  check_modifier_grammar(name, text, scope);
}

}  // namespace

std::string ScoreModifiers::digest() const {
  if (empty()) return "";
  detail::KeyBuilder key;
  key.add("score_mod").add(score).add("mask_mod").add(mask);
  if (dropout) key.add("dropout");
  for (const CaptureType& c : captures) {
    key.add("capture")
        .add(c.name)
        .add(std::string(dtype_name(c.dtype)))
        .add(std::to_string(c.rank));
    if (c.grad) key.add("grad");
  }
  return key.hex_digest().substr(0, 16);
}

std::string ScoreModifiers::type_name() const {
  return empty() ? "flashjit::NoModifiers" : "flashjit_user::Modifiers_" + digest();
}

namespace {

/// The C++ type a capture's elements have in the kernels (the 16-bit ones as the attention
/// kernels' elements are named).
std::string element_type(DType dtype) {
  if (dtype == DType::f32) return "float";
  if (dtype == DType::i32) return "int";
  return template_element(dtype);
}

/// The declarations opening each capture under its name in a modifier's body; capture
/// `recorded` (if any) as a RecordingView writing the offset it reads to `read`.
std::string opened_captures(const std::vector<CaptureType>& captures, int recorded = -1) {
  std::string opened = "    (void)b, (void)h, (void)q_idx, (void)kv_idx, (void)captures;\n";
  for (std::size_t i = 0; i < captures.size(); ++i) {
    const CaptureType& c = captures[i];
    const bool recording = static_cast<int>(i) == recorded;
    opened += std::string("    const flashjit::") +
              (recording ? "RecordingView<" : "CaptureView<") + element_type(c.dtype) + ", " +
              std::to_string(c.rank) + "> " + c.name + "(captures.slot[" + std::to_string(i) + "]" +
              (recording ? ", read" : "") + ");\n    (void)" + c.name + ";\n";
  }
  return opened;
}

}  // namespace

std::string ScoreModifiers::definition() const {
  if (empty()) return "";
  // The parameters are used through (void) so that an expression that ignores some compiles
  // without warnings; the #line directives make errors name the caller's field and column.
  const std::string parameters =
      "int b, int h, int q_idx, int kv_idx, const flashjit::CaptureTable& captures";
  const std::string score_text = "#line 1 \"attention.score_mod\"\n" +
                                 (score.empty() ? std::string("score") : score) + "\n);\n  }\n";
  // For each capture with a gradient: score_mod on a dual score of slope 0 and that capture's
  // element of slope 1, and the sum adding dS times that slope where the element is.
  std::string gradients, slopes;
  for (std::size_t i = 0; i < captures.size(); ++i) {
    if (!captures[i].grad) continue;
    const std::string n = std::to_string(i);
    slopes += "  FJ_DEVICE static flashjit::Dual<float> slope_of_capture_" + n +
              "(flashjit::Dual<float> score, " + parameters + ", flashjit::index_t* read) {\n" +
              opened_captures(captures, static_cast<int>(i)) +
              "    return static_cast<flashjit::Dual<float>>(\n" + score_text;
    gradients +=
        "    {\n      flashjit::index_t read = -1;\n"
        "      const flashjit::Dual<float> y = slope_of_capture_" +
        n +
        "(flashjit::Dual<float>(score, 0.0f), b, h, q_idx, kv_idx, captures, &read);\n"
        "      if (read >= 0) flashjit::atomic_add_global(captures.slot[" +
        n + "].grad, read, ds * y.slope);\n    }\n";
  }
  return "\n#include \"attention/parts/modifier_functions.cuh\"\nnamespace flashjit_user {\n"
         "struct Modifiers_" +
         digest() + " {\n" +
         "  static constexpr bool kScore = " + (score.empty() ? "false" : "true") + ";\n" +
         "  static constexpr bool kMask = " + (mask.empty() ? "false" : "true") + ";\n" +
         "  static constexpr bool kDropout = " + (dropout ? "true" : "false") + ";\n" +
         "  static constexpr bool kCaptureGradients = " + (gradients.empty() ? "false" : "true") +
         ";\n" + "  template <class Score>\n" + "  FJ_DEVICE static Score score(Score score, " +
         parameters + ") {\n" + opened_captures(captures) + "    return static_cast<Score>(\n" +
         score_text + "  FJ_DEVICE static bool mask(" + parameters + ") {\n" +
         opened_captures(captures) + "    return static_cast<bool>(\n" +
         "#line 1 \"attention.mask_mod\"\n" + (mask.empty() ? std::string("true") : mask) +
         "\n);\n  }\n" + slopes + "  FJ_DEVICE static void add_capture_gradients(float score, " +
         "float ds, " + parameters +
         ") {\n    (void)score, (void)ds, (void)b, (void)h, (void)q_idx, (void)kv_idx, "
         "(void)captures;\n" +
         gradients + "  }\n};\n}  // namespace flashjit_user\n";
}

ScoreModifiers score_modifiers(const Attention& attention) {
  ScoreModifiers modifiers{attention.score_mod, attention.mask_mod, {},
                           attention.dropout_p > 0.0f};
  for (const Capture& c : attention.captures) {
    modifiers.captures.push_back({c.name, c.tensor.dtype, c.tensor.rank, c.grad.data != nullptr});
  }
  return modifiers;
}

void check_score_modifiers(const Attention& attention) {
  check_captures(attention);
  ModifierScope scope;
  for (const Capture& c : attention.captures) scope.captures.push_back({c.name, c.tensor.rank});
  if (!attention.score_mod.empty()) {
    check_expression("attention.score_mod", attention.score_mod, scope);
  }
  scope.has_score = false;  // mask_mod sees the indices only
  if (!attention.mask_mod.empty()) {
    check_expression("attention.mask_mod", attention.mask_mod, scope);
  }
}

}  // namespace flashjit::kernels
