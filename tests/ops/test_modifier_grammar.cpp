// The modifier grammar (attention/modifiers/modifier_grammar.hpp): a table of expressions it
// accepts and of those it refuses, hostile ones first, each refusal an InvalidArgument naming the
// field and saying what was found where. validate_attention applies it on every backend.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "attention/attention_forward.hpp"
#include "attention/modifiers/modifier_grammar.hpp"
#include "flashjit/attention.hpp"
#include "flashjit/error.hpp"

namespace flashjit::testing {
namespace {

using kernels::check_modifier_grammar;
using kernels::ModifierScope;

/// score_mod's scope with a rank-2 "bias" and a rank-1 "doc".
ModifierScope with_captures() { return {true, {{"bias", 2}, {"doc", 1}}}; }

void accepts(const std::string& text, const ModifierScope& scope = with_captures()) {
  INFO(text);
  CHECK_NOTHROW(check_modifier_grammar("attention.score_mod", text, scope));
}

void refuses(const std::string& text, const std::string& why,
             const ModifierScope& scope = with_captures()) {
  INFO(text);
  CHECK_THROWS_WITH_AS(check_modifier_grammar("attention.score_mod", text, scope),
                       doctest::Contains("'attention.score_mod'"), InvalidArgument);
  CHECK_THROWS_WITH_AS(check_modifier_grammar("attention.score_mod", text, scope),
                       doctest::Contains(why.c_str()), InvalidArgument);
}

}  // namespace

TEST_CASE("modifier grammar: what users write is accepted") {
  accepts("score");
  accepts("score - 0.0625f * (h + 1) * (q_idx - kv_idx)");
  accepts("4.0f * tanhf(score / 4.0f) + 0.02f * (kv_idx - q_idx)");
  accepts("q_idx / 1024 == kv_idx / 1024 && (kv_idx + b) % 5 != 0 || !(h < 2)");
  accepts("q_idx - kv_idx < 0 ? 0.0f : score + bias[h][q_idx - kv_idx + 4095]");
  accepts("doc[q_idx] == doc[kv_idx]");
  accepts("score + bias [h] [min(max(q_idx - kv_idx, -8), 8) + 8]");  // spaces before '['
  accepts("score - alibi_slopes[b][h] * fabsf(float(q_idx + alibi_offsets[b] - kv_idx))",
          {true, {{"alibi_slopes", 2}, {"alibi_offsets", 1}}});
  accepts("powf(fabs(score), 1.5f) + exp2(-1e-3f * kv_idx) + log1p(.5) + int(2.5f) * 3");
  accepts("((q_idx ^ kv_idx) & 63) == 0 | (q_idx >> 2 << 1 > kv_idx) ? true : false");
  accepts("-+-~q_idx");
  accepts("fmaxf(fminf(score, 30.0f), -30.0F) + 1.E2f + 2e+1");
  accepts("2147483647");
  accepts("0 + 0.0");
  accepts("kv_idx <= q_idx", {false, {}});
}

TEST_CASE("modifier grammar: hostile text is refused before any compiler sees it") {
  refuses("(abort(), score)", "'abort', which is not a name a modifier may use");
  refuses("(__builtin_trap(), score)", "'__builtin_trap'");
  refuses("(exit(7), score)", "'exit'");
  refuses("score + (system(0) != 0 ? 100.0f : 0.0f)", "'system'");
  refuses("std::exp(score)", "'std'");
  refuses("::expf(score)", "':'");
  refuses("score + asm(0)", "'asm'");
  refuses("([&] { float s = score; return s * 2; }())", "'{'");
  refuses("score; return 0", "';'");
  refuses("score } struct X {", "'}'");
  refuses("score #define x", "'#'");
  refuses("q_idx == \"x\"[0]", "'\"'");
  refuses("score + 'a'", "'''");
  refuses("score // comment", "'/' where a number, a name or '(' should be");
  refuses("score /* comment */", "'*' where a number, a name or '(' should be");
  refuses("score \\\n + 1", "'\\'");
  refuses("score`", "'`'");
  refuses("score.value", "'.'");
  refuses("score->x", "'>' where a number");
  refuses("printf(0)", "'printf'");
  refuses("captures.slot[0].data", "'.'");
  refuses("captures", "'captures', which is not a name");
  refuses("flashjit::negative_infinity()", "'flashjit'");
  refuses("mask(b, h, q_idx, kv_idx, captures)", "'mask'");
  refuses("sizeof(score)", "'sizeof'");
  refuses("new int", "'new'");
  refuses("score = 0", "'=', which no modifier expression uses (an assignment");
  refuses("score += 1", "'='");
  refuses("score++", "ends where a number, a name or '(' should be");
  refuses("q_idx, kv_idx", "',' where the expression should end");
}

TEST_CASE("modifier grammar: characters, numbers and shapes outside it are named") {
  refuses("score\t+ 1", "a control or non-ASCII character (code 9)");
  refuses("score\n+ 1", "code 10");
  refuses("score + \x7f", "code 127");
  refuses("score * \xc3\xa9", "non-ASCII");
  refuses("score + 010", "leading zero");
  refuses("score + 0x10", "malformed number '0x10'");
  refuses("score + 1f", "malformed number '1f'");
  refuses("score + 1u", "malformed number '1u'");
  refuses("score + 1.5.2", "malformed number '1.5.2'");
  refuses("score + 1e", "malformed exponent");
  refuses("score + 2147483648", "past the largest int");
  refuses("score + 99999999999999999999", "past the largest int");
  refuses("(score", "ends where a ')' closing the '(' should be");
  refuses("score) + (score", "')' where the expression should end");
  refuses("score +", "ends where a number, a name or '(' should be");
  refuses("q_idx < 3 ? score", "ends where the ':' of '?:' should be");
  refuses("", "ends where a number");
  refuses(std::string(65, '(') + "score" + std::string(65, ')'), "nests deeper than 64");
  refuses(std::string(4000, '-') + "score", "nests deeper than 64");
  accepts(std::string(30, '(') + "score" + std::string(30, ')'));
}

TEST_CASE("modifier grammar: names, calls and indices are checked against the call") {
  refuses("score + undefined_name", "'undefined_name', which is not a name");
  refuses("missing[q_idx] == 0",
          "reads 'missing[...]', but no capture is named 'missing' "
          "(attention.captures has 'bias', 'doc')");
  refuses("bias[h] + score", "'+' where index 2 of 'bias' should be (its rank is 2: bias[i][j])");
  refuses("bias + score", "index 1 of 'bias'");
  refuses("doc[q_idx][0]", "'[' past the 1 indices of 'doc'");
  refuses("q_idx[0]", "after 'q_idx', an int or float");
  refuses("score(1)", "after 'score'");
  refuses("expf", "ends where the '(' of expf(...) should be");
  refuses("expf(score, 1)", "',' past the last argument of expf, which takes 1");
  refuses("powf(score)", "')' where the ',' before argument 2 of powf");
  refuses("min(score, 1, 2)", "past the last argument of min");
  refuses("float(score", "the ')' closing the call");
  refuses("kv_idx <= q_idx + score", "reads 'score', which only score_mod has", {false, {}});
  refuses("double(score)", "'double'");
  refuses("(float)score",
          "')' where the '(' of float(...) should be");  // casts are float(x), int(x)
}

TEST_CASE("modifier grammar: validate_attention applies it to both fields, over the captures") {
  Attention a;
  a.seqlen_q = a.seqlen_k = 16;
  Attention bad = a;
  bad.mask_mod = "(abort(), true)";
  CHECK_THROWS_WITH_AS(kernels::validate_attention(bad), doctest::Contains("'attention.mask_mod'"),
                       InvalidArgument);
  bad = a;
  bad.score_mod = "score\t";
  CHECK_THROWS_WITH_AS(kernels::validate_attention(bad), doctest::Contains("'attention.score_mod'"),
                       InvalidArgument);
  bad.score_mod = std::string(5000, 'q');
  CHECK_THROWS_WITH_AS(kernels::validate_attention(bad), doctest::Contains("over 4096"),
                       InvalidArgument);
  bad.score_mod = "   ";
  CHECK_THROWS_WITH_AS(kernels::validate_attention(bad), doctest::Contains("blank"),
                       InvalidArgument);
  Attention fine = a;
  fine.score_mod = "score * 2";
  fine.mask_mod = "kv_idx <= q_idx";
  CHECK_NOTHROW(kernels::validate_attention(fine));
}

TEST_CASE("modifier grammar: random text never crashes it, and what it accepts is balanced") {
  // Token soup, grammar pieces and hostile ones mixed: every text is either accepted or refused
  // with InvalidArgument (no other exception, no crash, no hang); an accepted one has only
  // printable ASCII and balanced brackets, so it cannot close the kernel's own parenthesis.
  const std::vector<std::string> pieces = {
      "score", "b",   "h",    "q_idx", "kv_idx", "bias", "doc", "[",  "]",  "(",  ")",    "+",
      "-",     "*",   "/",    "%",     "<",      "<=",   "==",  "!=", "&&", "||", "!",    "~",
      "&",     "|",   "^",    "<<",    ">>",     "?",    ":",   ",",  " ",  "1",  "0.5f", "1e3",
      "expf",  "min", "powf", "float", "int",    "true", ";",   "{",  "}",  "#",  "\"",   "'",
      "=",     ".",   "::",   "abort", "\t",     "\n",   "/*",  "//", "<:", "%:"};
  std::uint64_t state = 7;
  const auto next = [&](std::uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % n;
  };
  int accepted = 0;
  for (int i = 0; i < 200000; ++i) {
    std::string text;
    for (std::uint64_t n = 1 + next(12); n > 0; --n) text += pieces[next(pieces.size())];
    try {
      check_modifier_grammar("attention.score_mod", text, with_captures());
    } catch (const InvalidArgument&) {
      continue;
    }
    ++accepted;
    int depth = 0;
    for (char c : text) {
      REQUIRE_MESSAGE((c >= 0x20 && c < 0x7f), text);
      REQUIRE_MESSAGE(std::string(";{}#\"'\\`").find(c) == std::string::npos, text);
      depth += c == '(' || c == '[' ? 1 : c == ')' || c == ']' ? -1 : 0;
      REQUIRE_MESSAGE(depth >= 0, text);
    }
    REQUIRE_MESSAGE(depth == 0, text);
  }
  MESSAGE(accepted << " of 200000 random texts accepted");
  CHECK(accepted > 100);  // the soup does hit the grammar
}

TEST_CASE("modifier grammar: a capture may not take a C++ keyword or a function's name") {
  float table[4] = {};
  for (const char* name : {"min", "expf", "float", "true", "delete", "return", "and"}) {
    Attention a;
    a.seqlen_q = a.seqlen_k = 16;
    a.captures = {{name, TensorView::contiguous(table, DType::f32, {4})}};
    a.score_mod = std::string("score + ") + name + "[0]";
    INFO(name);
    CHECK_THROWS_WITH_AS(kernels::validate_attention(a),
                         doctest::Contains("'attention.captures[0].name'"), InvalidArgument);
  }
  CHECK(kernels::is_reserved_word("static_cast"));
  CHECK_FALSE(kernels::is_reserved_word("bias"));
}

}  // namespace flashjit::testing
