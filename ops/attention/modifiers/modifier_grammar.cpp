#include "attention/modifiers/modifier_grammar.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <utility>

#include "flashjit/error.hpp"

namespace flashjit::kernels {
namespace {

/// Parentheses, brackets and unary operators nest at most this deep: the parser recurses
/// once a level, and a 4096-character text of '(' must not exhaust the caller's stack.
constexpr int kMaxDepth = 64;

constexpr std::array<std::string_view, 5> kIndexNames = {"b", "h", "q_idx", "kv_idx", "score"};

enum class Kind { number, name, symbol, end };

struct Token {
  Kind kind;
  std::string_view text;
  std::size_t at;  ///< 0-based position in the expression
};

bool name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_'; }
bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }
bool digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

/// The function of the grammar named `name`, or nullptr.
const ModifierFunction* find_function(std::string_view name) {
  const std::vector<ModifierFunction>& functions = modifier_functions();
  const auto found = std::find_if(functions.begin(), functions.end(),
                                  [&](const ModifierFunction& f) { return f.name == name; });
  return found == functions.end() ? nullptr : &*found;
}

/// The error for text outside the grammar, `at` its 0-based position.
[[noreturn]] void refuse_at(const std::string& field, std::size_t at, const std::string& why) {
  throw InvalidArgument(field, why + " (at character " + std::to_string(at + 1) +
                                   "); a modifier is one expression of the grammar in "
                                   "docs/modifiers.md");
}

/// Splits the text into tokens, refusing any character no token has.
class Lexer {
 public:
  Lexer(std::string_view text, const std::string& field) : text_(text), field_(field) {}

  std::vector<Token> tokens() {
    std::vector<Token> out;
    while (true) {
      while (at_ < text_.size() && text_[at_] == ' ') ++at_;
      if (at_ == text_.size()) break;
      const char c = text_[at_];
      if (digit(c) || (c == '.' && at_ + 1 < text_.size() && digit(text_[at_ + 1]))) {
        out.push_back(number());
      } else if (name_start(c)) {
        const std::size_t start = at_;
        while (at_ < text_.size() && name_char(text_[at_])) ++at_;
        out.push_back({Kind::name, text_.substr(start, at_ - start), start});
      } else {
        out.push_back(symbol());
      }
    }
    out.push_back({Kind::end, "", text_.size()});
    return out;
  }

 private:
  [[noreturn]] void refuse(std::size_t at, const std::string& why) const {
    refuse_at(field_, at, why);
  }

  void digits() {
    while (at_ < text_.size() && digit(text_[at_])) ++at_;
  }

  /// A decimal int (no leading zero: C++ would read 010 as octal 8), or a float: digits with
  /// a point or an exponent, then an optional f.
  Token number() {
    const std::size_t start = at_;
    digits();
    bool is_float = false;
    if (at_ < text_.size() && text_[at_] == '.') {
      is_float = true;
      ++at_;
      digits();
    }
    if (at_ < text_.size() && (text_[at_] == 'e' || text_[at_] == 'E')) {
      is_float = true;
      ++at_;
      if (at_ < text_.size() && (text_[at_] == '+' || text_[at_] == '-')) ++at_;
      if (at_ == text_.size() || !digit(text_[at_])) refuse(start, "has a malformed exponent");
      digits();
    }
    if (is_float && at_ < text_.size() && (text_[at_] == 'f' || text_[at_] == 'F')) ++at_;
    const std::string_view token = text_.substr(start, at_ - start);
    if (at_ < text_.size() && (name_char(text_[at_]) || text_[at_] == '.')) {
      std::size_t end = at_;
      while (end < text_.size() && (name_char(text_[end]) || text_[end] == '.')) ++end;
      refuse(start, "has the malformed number '" + std::string(text_.substr(start, end - start)) +
                        "' (numbers are decimal: 3, 0.5f, 1e-3f)");
    }
    if (!is_float && token.size() > 1 && token[0] == '0') {
      refuse(start, "has '" + std::string(token) + "', an int with a leading zero (C++ reads "
                                                   "it as octal)");
    }
    if (!is_float && (token.size() > 10 || std::stoll(std::string(token)) > INT32_MAX)) {
      refuse(start, "has " + std::string(token) + ", past the largest int 2147483647");
    }
    return {Kind::number, token, start};
  }

  Token symbol() {
    static constexpr std::array<std::string_view, 8> kPairs = {
        "<<", ">>", "<=", ">=", "==", "!=", "&&", "||"};
    static constexpr std::string_view kSingles = "+-*/%()[]?:,<>!~&|^";
    const std::string_view rest = text_.substr(at_);
    for (std::string_view pair : kPairs) {
      if (rest.substr(0, 2) == pair) {
        at_ += 2;
        return {Kind::symbol, pair, at_ - 2};
      }
    }
    const char c = text_[at_];
    const auto code = static_cast<unsigned char>(c);
    if (code < 0x20 || code >= 0x7f) {
      refuse(at_, "has a control or non-ASCII character (code " + std::to_string(code) +
                      "); only printable ASCII and spaces");
    }
    if (kSingles.find(c) == std::string_view::npos) {
      const std::string why = c == '='   ? " (an assignment; '==' compares)"
                              : c == ';' ? " (a statement's end; a modifier is one expression)"
                                         : "";
      refuse(at_, std::string("has '") + c + "', which no modifier expression uses" + why);
    }
    const Token single{Kind::symbol, text_.substr(at_, 1), at_};
    ++at_;
    return single;
  }

  std::string_view text_;
  const std::string& field_;
  std::size_t at_ = 0;
};

/// Recursive descent over the tokens, one function a precedence level.
class Parser {
 public:
  Parser(std::vector<Token> tokens, const std::string& field, const ModifierScope& scope)
      : tokens_(std::move(tokens)), field_(field), scope_(scope) {}

  void parse() {
    expression();
    if (peek().kind != Kind::end) refuse("where the expression should end");
  }

 private:
  const Token& peek() const { return tokens_[next_]; }
  bool take(std::string_view symbol) {
    if (peek().kind != Kind::symbol || peek().text != symbol) return false;
    ++next_;
    return true;
  }
  void expect(std::string_view symbol, const char* what) {
    if (!take(symbol)) refuse(std::string("where ") + what + " should be");
  }

  /// Refuses the next token, saying what should have been `where` it stands.
  [[noreturn]] void refuse(const std::string& where) const {
    const Token& t = peek();
    const std::string found = t.kind == Kind::end ? "ends" : "has '" + std::string(t.text) + "'";
    fail(t, found + " " + where);
  }
  [[noreturn]] void fail(const Token& t, const std::string& why) const {
    refuse_at(field_, t.at, why);
  }

  /// Guards one level of nesting: an expression (in parentheses, an index, an argument, a
  /// branch) or a unary operator.
  struct Depth {
    explicit Depth(Parser& p) : parser(p) {
      if (++parser.depth_ > kMaxDepth) {
        parser.fail(parser.peek(), "nests deeper than " + std::to_string(kMaxDepth) + " levels");
      }
    }
    ~Depth() { --parser.depth_; }
    Parser& parser;
  };

  void expression() {
    Depth depth(*this);
    binary(0);
    if (take("?")) {
      expression();
      expect(":", "the ':' of '?:'");
      expression();
    }
  }

  /// The binary operators by precedence, loosest first (C++'s order).
  void binary(std::size_t level) {
    static const std::vector<std::vector<std::string_view>> kLevels = {{"||"},
                                                                       {"&&"},
                                                                       {"|"},
                                                                       {"^"},
                                                                       {"&"},
                                                                       {"==", "!="},
                                                                       {"<", "<=", ">", ">="},
                                                                       {"<<", ">>"},
                                                                       {"+", "-"},
                                                                       {"*", "/", "%"}};
    if (level == kLevels.size()) return unary();
    binary(level + 1);
    while (peek().kind == Kind::symbol && std::find(kLevels[level].begin(), kLevels[level].end(),
                                                    peek().text) != kLevels[level].end()) {
      ++next_;
      binary(level + 1);
    }
  }

  void unary() {
    if (take("-") || take("+") || take("!") || take("~")) {
      Depth depth(*this);
      return unary();
    }
    primary();
  }

  void primary() {
    const Token t = peek();
    if (t.kind == Kind::number) {
      ++next_;
    } else if (take("(")) {
      expression();
      expect(")", "a ')' closing the '('");
    } else if (t.kind == Kind::name) {
      ++next_;
      name(t);
    } else {
      refuse("where a number, a name or '(' should be");
    }
  }

  void name(const Token& t) {
    if (t.text == "true" || t.text == "false") return;
    if (t.text == "score" && !scope_.has_score) {
      fail(t, "reads 'score', which only score_mod has (mask_mod sees b, h, q_idx, kv_idx)");
    }
    if (std::find(kIndexNames.begin(), kIndexNames.end(), t.text) != kIndexNames.end()) {
      if (peek().kind == Kind::symbol && (peek().text == "(" || peek().text == "[")) {
        refuse("after '" + std::string(t.text) + "', an int or float, not a function or tensor");
      }
      return;
    }
    const auto capture = std::find_if(scope_.captures.begin(), scope_.captures.end(),
                                      [&](const CaptureName& c) { return c.name == t.text; });
    if (capture != scope_.captures.end()) return subscripts(t, capture->rank);
    if (const ModifierFunction* function = find_function(t.text)) {
      return call(t, function->arity);
    }
    if (peek().kind == Kind::symbol && peek().text == "[") unknown_capture(t);
    fail(t, "has '" + std::string(t.text) +
                "', which is not a name a modifier may use: " + vocabulary());
  }

  void subscripts(const Token& t, int rank) {
    for (int i = 0; i < rank; ++i) {
      if (!take("[")) {
        std::string indexed(t.text);
        for (int d = 0; d < rank; ++d) indexed += std::string("[") + "ijkl"[d] + "]";
        refuse("where index " + std::to_string(i + 1) + " of '" + std::string(t.text) +
               "' should be (its rank is " + std::to_string(rank) + ": " + indexed + ")");
      }
      expression();
      expect("]", "a ']' closing the index");
    }
    if (peek().kind == Kind::symbol && peek().text == "[") {
      refuse("past the " + std::to_string(rank) + " indices of '" + std::string(t.text) +
             "' (its rank)");
    }
  }

  void call(const Token& t, int arity) {
    expect("(", ("the '(' of " + std::string(t.text) + "(...)").c_str());
    for (int i = 0; i < arity; ++i) {
      if (i > 0)
        expect(",", ("the ',' before argument " + std::to_string(i + 1) + " of " +
                     std::string(t.text) + ", which takes " + std::to_string(arity))
                        .c_str());
      expression();
    }
    if (peek().kind == Kind::symbol && peek().text == ",") {
      refuse("past the last argument of " + std::string(t.text) + ", which takes " +
             std::to_string(arity));
    }
    expect(")", "the ')' closing the call");
  }

  [[noreturn]] void unknown_capture(const Token& t) const {
    std::string names;
    for (const CaptureName& c : scope_.captures)
      names += (names.empty() ? "'" : ", '") + c.name + "'";
    fail(t, "reads '" + std::string(t.text) + "[...]', but no capture is named '" +
                std::string(t.text) + "' (attention.captures has " +
                (names.empty() ? std::string("none") : names) + ")");
  }

  std::string vocabulary() const {
    std::string names = scope_.has_score ? "score, b, h, q_idx, kv_idx" : "b, h, q_idx, kv_idx";
    for (const CaptureName& c : scope_.captures) names += ", " + c.name + "[...]";
    names += ", true, false and the functions";
    for (const ModifierFunction& f : modifier_functions()) names += " " + std::string(f.name);
    return names;
  }

  std::vector<Token> tokens_;
  std::size_t next_ = 0;
  int depth_ = 0;
  const std::string& field_;
  const ModifierScope& scope_;
};

}  // namespace

bool is_reserved_word(std::string_view name) {
  // C++'s keywords and alternative tokens: a capture under one of these names could not be
  // declared in the kernel; and the grammar's own words.
  static constexpr std::array<std::string_view, 98> kWords = {
      "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break",
      "case", "catch", "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept",
      "const", "consteval", "constexpr", "constinit", "const_cast", "continue", "co_await",
      "co_return", "co_yield", "decltype", "default", "delete", "do", "double", "dynamic_cast",
      "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto",
      "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
      "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register",
      "reinterpret_cast", "requires", "return", "short", "signed", "sizeof", "static",
      "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local",
      "throw", "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using",
      "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq", "__device__",
      "__global__", "__host__", "__shared__", "__constant__", "__restrict__"};
  return std::find(kWords.begin(), kWords.end(), name) != kWords.end() ||
         find_function(name) != nullptr;
}

const std::vector<ModifierFunction>& modifier_functions() {
  static const std::vector<ModifierFunction> kFunctions = {
      {"exp", 1},  {"expf", 1},  {"exp2", 1},  {"exp2f", 1},  {"log", 1},   {"logf", 1},
      {"log2", 1}, {"log2f", 1}, {"log1p", 1}, {"log1pf", 1}, {"sqrt", 1},  {"sqrtf", 1},
      {"tanh", 1}, {"tanhf", 1}, {"sin", 1},   {"sinf", 1},   {"cos", 1},   {"cosf", 1},
      {"abs", 1},  {"fabs", 1},  {"fabsf", 1}, {"pow", 2},    {"powf", 2},  {"min", 2},
      {"max", 2},  {"fmin", 2},  {"fminf", 2}, {"fmax", 2},   {"fmaxf", 2}, {"float", 1},
      {"int", 1}};
  return kFunctions;
}

void check_modifier_grammar(const std::string& field, std::string_view text,
                            const ModifierScope& scope) {
  Parser(Lexer(text, field).tokens(), field, scope).parse();
}

}  // namespace flashjit::kernels
