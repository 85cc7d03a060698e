#include "attention/score_modifiers.hpp"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <utility>

#include "attention/attention_captures.hpp"
#include "attention/attention_common.hpp"
#include "flashjit/error.hpp"
#include "runtime/hashing.hpp"

namespace flashjit::kernels {
namespace {

constexpr std::size_t kMaxLength = 4096;

bool identifier_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

/// Whether `text` has `word` as a whole identifier.
bool has_identifier(std::string_view text, std::string_view word) {
  for (std::size_t at = text.find(word); at != std::string_view::npos;
       at = text.find(word, at + 1)) {
    const bool starts = at == 0 || !identifier_char(text[at - 1]);
    const std::size_t end = at + word.size();
    const bool ends = end == text.size() || !identifier_char(text[end]);
    if (starts && ends) return true;
  }
  return false;
}

/// Throws unless `text` is one expression: the rules of check_score_modifiers().
void check_expression(const char* name, const std::string& text) {
  const auto reject = [&](const std::string& why) {
    throw InvalidArgument(name, why + "; a modifier is one C++ expression (see Attention::" +
                                    std::string(name).substr(10) + ")");
  };
  if (text.size() > kMaxLength) {
    reject("is " + std::to_string(text.size()) + " characters, over " + std::to_string(kMaxLength));
  }
  if (text.find_first_not_of(" \t") == std::string::npos) reject("is blank");
  std::string closers;  // the brackets open at each point, innermost last
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const auto at = [&] { return " (at character " + std::to_string(i + 1) + ")"; };
    if (static_cast<unsigned char>(c) >= 0x7f || (c < 0x20 && c != '\t')) {
      reject("has a control or non-ASCII character" + at());
    }
    if (c == '#' || c == '"' || c == '\'' || c == '\\' || c == '`') {
      reject(std::string("has '") + c + "'" + at());
    }
    if (c == '/' && i + 1 < text.size() && (text[i + 1] == '/' || text[i + 1] == '*')) {
      reject("has a comment" + at());
    }
    const bool in_parentheses = closers.find(')') != std::string::npos;
    if (c == ';' && !in_parentheses) reject("has ';' outside parentheses" + at());
    if ((c == '{' || c == '}') && !in_parentheses) reject("has a brace outside parentheses" + at());
    if (c == '(' || c == '[' || c == '{') closers += c == '(' ? ')' : c == '[' ? ']' : '}';
    if (c == ')' || c == ']' || c == '}') {
      if (closers.empty() || closers.back() != c)
        reject(std::string("has an unmatched '") + c + "'" + at());
      closers.pop_back();
    }
  }
  if (!closers.empty())
    reject("has an unclosed '" +
           std::string(1, closers.back() == ')'   ? '('
                          : closers.back() == ']' ? '['
                                                  : '{') +
           "'");
  for (std::string_view word : {"asm", "__asm", "__asm__"}) {
    if (has_identifier(text, word)) reject("uses asm");
  }
}

/// Throws unless every name `text` indexes (`doc[...]`) is a capture's: an expression reading
/// a tensor the call did not pass is named here, before anything compiles.
void check_indexed_names(const char* field, const std::string& text,
                         const std::vector<Capture>& captures) {
  for (std::size_t at = text.find('['); at != std::string::npos; at = text.find('[', at + 1)) {
    std::size_t end = at;
    while (end > 0 && (text[end - 1] == ' ' || text[end - 1] == '\t')) --end;
    std::size_t begin = end;
    while (begin > 0 && identifier_char(text[begin - 1])) --begin;
    if (begin == end || std::isdigit(static_cast<unsigned char>(text[begin])) != 0) continue;
    const std::string name = text.substr(begin, end - begin);
    const bool captured = std::any_of(captures.begin(), captures.end(),
                                      [&](const Capture& c) { return c.name == name; });
    if (captured) continue;
    std::string names;
    for (const Capture& c : captures) names += (names.empty() ? "'" : ", '") + c.name + "'";
    throw InvalidArgument(field, "reads '" + name + "[...]', but no capture is named '" + name +
                                     "' (attention.captures has " +
                                     (names.empty() ? std::string("none") : names) + ")");
  }
}

}  // namespace

std::string ScoreModifiers::digest() const {
  if (empty()) return "";
  detail::KeyBuilder key;
  key.add("score_mod").add(score).add("mask_mod").add(mask);
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
  return "\nnamespace flashjit_user {\n"
         "struct Modifiers_" +
         digest() + " {\n" +
         "  static constexpr bool kScore = " + (score.empty() ? "false" : "true") + ";\n" +
         "  static constexpr bool kMask = " + (mask.empty() ? "false" : "true") + ";\n" +
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
  ScoreModifiers modifiers{attention.score_mod, attention.mask_mod, {}};
  for (const Capture& c : attention.captures) {
    modifiers.captures.push_back({c.name, c.tensor.dtype, c.tensor.rank, c.grad.data != nullptr});
  }
  return modifiers;
}

void check_score_modifiers(const Attention& attention) {
  check_captures(attention);
  for (const auto& [name, text] :
       {std::pair<const char*, const std::string&>{"attention.score_mod", attention.score_mod},
        {"attention.mask_mod", attention.mask_mod}}) {
    if (text.empty()) continue;
    check_expression(name, text);
    check_indexed_names(name, text, attention.captures);
  }
}

}  // namespace flashjit::kernels
