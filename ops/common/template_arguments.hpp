#pragma once
// A kernel's template arguments by name: each value is given under its parameter's name in the
// traits type's declaration, in that order, so a kernel spec says which value is which rather
// than restating the declaration's order in concatenated strings. Arguments after the last one
// that differs from its default are left out, as C++ lets a caller leave them (the emulator's
// built-in instances are named that way, so the runtime finds them by the same expression).
#include <concepts>
#include <string>
#include <string_view>
#include <vector>

namespace flashjit::kernels {

class TemplateArguments {
 public:
  /// The arguments of `templ`, a class template's qualified name ("flashjit::ForwardTraits").
  explicit TemplateArguments(std::string templ) : template_(std::move(templ)) {}

  /// A parameter without a default: its value is always written.
  TemplateArguments& add(std::string_view name, std::string_view value);
  /// A parameter with a default: written only when it or a later argument differs from its own.
  TemplateArguments& add(std::string_view name, std::string_view value,
                         std::string_view fallback);
  /// An int or bool parameter (exactly those types: a string literal must not become `true`).
  template <class T>
    requires std::same_as<T, int> || std::same_as<T, bool>
  TemplateArguments& add(std::string_view name, T value) {
    return add(name, text(value));
  }
  template <class T>
    requires std::same_as<T, int> || std::same_as<T, bool>
  TemplateArguments& add(std::string_view name, T value, T fallback) {
    return add(name, text(value), text(fallback));
  }

  /// "flashjit::ForwardTraits<...>", the trailing defaulted arguments left out.
  std::string expression() const;
  /// Every parameter's name, in order (the defaulted ones left out of expression() included).
  std::vector<std::string> names() const;
  /// Each parameter's default as written ("" for a parameter without one), in names()' order.
  std::vector<std::string> defaults() const;

 private:
  static std::string text(int value) { return std::to_string(value); }
  static std::string text(bool value) { return value ? "true" : "false"; }

  struct Argument {
    std::string name, value, fallback;
    bool has_default = false;
  };
  std::string template_;
  std::vector<Argument> arguments_;
};

/// A kernel as a spec names it: `function<traits>` in `header`; or, where `function` is empty,
/// the function template `traits` itself names, instantiated with its own arguments.
struct KernelTemplate {
  std::string header;    ///< "attention/fa2/forward_kernel.cuh", as NVRTC includes it
  std::string function;  ///< "flashjit::attention_forward_kernel", or empty (above)
  TemplateArguments traits;

  /// The spec's name expression ("flashjit::attention_forward_kernel<flashjit::ForwardTraits<
  /// ...>>").
  std::string name_expression() const {
    return function.empty() ? traits.expression() : function + "<" + traits.expression() + ">";
  }
};

}  // namespace flashjit::kernels
