#include "attention/modifiers/attention_captures.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

#include "attention/attention_common.hpp"
#include "attention/modifiers/modifier_grammar.hpp"
#include "common/argument_checks.hpp"
#include "flashjit/error.hpp"

namespace flashjit::kernels {
namespace {

constexpr std::size_t kMaxNameLength = 64;
static_assert(Capture::kMaxPerCall == kMaxCaptures, "the public limit is the kernels' table");

/// Why `name` cannot name a capture in an expression, or "" when it can.
std::string name_problem(const std::string& name) {
  if (name.empty()) return "is empty";
  if (name.size() > kMaxNameLength)
    return "is over " + std::to_string(kMaxNameLength) + " characters";
  const auto identifier = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
  };
  if (!std::all_of(name.begin(), name.end(), identifier) ||
      std::isdigit(static_cast<unsigned char>(name[0])) != 0) {
    return "is not an identifier (letters, digits and '_', not first a digit)";
  }
  constexpr std::array<const char*, 6> kTaken = {"score", "b", "h", "q_idx", "kv_idx", "captures"};
  for (const char* taken : kTaken) {
    if (name == taken) return "is one of the expressions' own names (score, b, h, q_idx, kv_idx)";
  }
  if (name.rfind("__", 0) == 0 || name.rfind("flashjit", 0) == 0) {
    return "starts with '__' or 'flashjit', which are reserved";
  }
  if (is_reserved_word(name)) {
    return "is a C++ keyword or a function of the modifiers' grammar (exp, min, float, ...)";
  }
  return "";
}

/// How many times `text` indexes `name` (`name[`, spaces allowed before the bracket).
int reads_of(const std::string& text, const std::string& name) {
  const auto identifier = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
  };
  int reads = 0;
  for (std::size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) {
    if (at > 0 && identifier(text[at - 1])) continue;
    std::size_t end = at + name.size();
    if (end < text.size() && identifier(text[end])) continue;
    while (end < text.size() && (text[end] == ' ' || text[end] == '\t')) ++end;
    if (end < text.size() && text[end] == '[') ++reads;
  }
  return reads;
}

/// Checks capture `c`'s gradient tensor (present): fp32, the tensor's shape and strides, a
/// float capture read exactly once by score_mod.
void check_gradient(const Attention& attention, const Capture& c, const std::string& field) {
  const TensorView& g = c.grad;
  if (c.tensor.dtype == DType::i32) {
    throw InvalidArgument(field + ".grad", "is set, but '" + c.name +
                                               "' is int32: only fp32, fp16 and bf16 captures "
                                               "have gradients");
  }
  if (g.dtype != DType::f32) {
    throw InvalidArgument(field + ".grad.dtype", "is " + std::string(dtype_name(g.dtype)) +
                                                     "; a capture's gradient is fp32");
  }
  if (g.rank != c.tensor.rank || g.shape != c.tensor.shape) {
    throw InvalidArgument(field + ".grad.shape", "must be the tensor's shape");
  }
  if (g.strides != c.tensor.strides) {
    throw InvalidArgument(field + ".grad.strides", "must be the tensor's strides");
  }
  check_tensor(g, field + ".grad", g.rank);
  const int reads = reads_of(attention.score_mod, c.name);
  if (reads != 1) {
    throw InvalidArgument(field + ".grad", "needs score_mod to read '" + c.name +
                                               "' exactly once (it reads it " +
                                               std::to_string(reads) +
                                               " times): its gradient is taken through that read");
  }
}

}  // namespace

void check_captures(const Attention& attention) {
  const std::vector<Capture>& captures = attention.captures;
  if (captures.size() > static_cast<std::size_t>(kMaxCaptures)) {
    throw InvalidArgument("attention.captures", "has " + std::to_string(captures.size()) +
                                                    " tensors; at most " +
                                                    std::to_string(kMaxCaptures));
  }
  for (std::size_t i = 0; i < captures.size(); ++i) {
    const Capture& c = captures[i];
    const std::string field = "attention.captures[" + std::to_string(i) + "]";
    const std::string problem = name_problem(c.name);
    if (!problem.empty()) throw InvalidArgument(field + ".name", "'" + c.name + "' " + problem);
    for (std::size_t j = 0; j < i; ++j) {
      if (captures[j].name == c.name) {
        throw InvalidArgument(field + ".name",
                              "'" + c.name + "' is also capture " + std::to_string(j) + "'s name");
      }
    }
    const TensorView& t = c.tensor;
    if (t.rank < 1 || t.rank > kMaxCaptureRank) {
      throw InvalidArgument(field + ".tensor.rank",
                            "is " + std::to_string(t.rank) + "; a capture has 1 to " +
                                std::to_string(kMaxCaptureRank) + " dimensions");
    }
    if (t.dtype != DType::f32 && t.dtype != DType::f16 && t.dtype != DType::bf16 &&
        t.dtype != DType::i32) {
      throw InvalidArgument(field + ".tensor.dtype", "is " + std::string(dtype_name(t.dtype)) +
                                                         "; a capture is fp32, fp16, bf16 or "
                                                         "int32");
    }
    check_tensor(t, field + ".tensor", t.rank);
    if (t.data == nullptr && t.numel() > 0) {
      throw InvalidArgument(field + ".tensor", "data pointer is null");
    }
    if (c.grad.data != nullptr) check_gradient(attention, c, field);
  }
}

void check_capture_gradients_disjoint(const Attention& attention,
                                      std::initializer_list<CallTensor> tensors) {
  const std::vector<Capture>& captures = attention.captures;
  for (std::size_t i = 0; i < captures.size(); ++i) {
    const TensorView& grad = captures[i].grad;
    if (grad.data == nullptr) continue;
    const std::string name = "attention.captures[" + std::to_string(i) + "].grad";
    check_no_self_overlap(grad, name);
    for (const CallTensor& t : tensors) {
      if (t.view->data == nullptr) continue;
      check_disjoint(grad, *t.view, name, t.name, t.written ? Role::output : Role::input);
    }
    for (std::size_t j = 0; j < captures.size(); ++j) {
      const std::string other = "attention.captures[" + std::to_string(j) + "]";
      if (captures[j].tensor.data != nullptr) {
        check_disjoint(grad, captures[j].tensor, name, other + ".tensor", Role::input);
      }
      if (j != i && captures[j].grad.data != nullptr) {
        check_disjoint(grad, captures[j].grad, name, other + ".grad", Role::output);
      }
    }
  }
}

CaptureTable capture_table(const Attention& attention) {
  CaptureTable table{};
  for (std::size_t i = 0; i < attention.captures.size(); ++i) {
    const TensorView& t = attention.captures[i].tensor;
    table.slot[i].data = t.data;
    table.slot[i].grad = static_cast<float*>(attention.captures[i].grad.data);
    for (int d = 0; d < t.rank; ++d) table.slot[i].strides[d] = t.strides[d];
  }
  return table;
}

void add_capture_buffers(const Attention& attention, std::vector<detail::KernelBuffer>& buffers) {
  for (const Capture& c : attention.captures) {
    if (c.tensor.data == nullptr) continue;
    buffers.push_back(kernel_buffer(c.tensor, ("capture." + c.name).c_str()));
    if (c.grad.data != nullptr) {
      buffers.push_back(kernel_buffer(c.grad, ("capture." + c.name + ".grad").c_str()));
    }
  }
}

}  // namespace flashjit::kernels
