#include "common/template_arguments.hpp"

#include <stdexcept>

namespace flashjit::kernels {

TemplateArguments& TemplateArguments::add(std::string_view name, std::string_view value) {
  if (!arguments_.empty() && arguments_.back().has_default) {
    // C++'s own rule: once a parameter has a default, every later one has one.
    throw std::logic_error("template parameter " + std::string(name) + " of " + template_ +
                           " follows a defaulted one and has no default");
  }
  arguments_.push_back({std::string(name), std::string(value), "", false});
  return *this;
}

TemplateArguments& TemplateArguments::add(std::string_view name, std::string_view value,
                                          std::string_view fallback) {
  arguments_.push_back({std::string(name), std::string(value), std::string(fallback), true});
  return *this;
}

std::string TemplateArguments::expression() const {
  std::size_t written = arguments_.size();
  while (written > 0 && arguments_[written - 1].has_default &&
         arguments_[written - 1].value == arguments_[written - 1].fallback) {
    --written;
  }
  std::string out = template_ + "<";
  for (std::size_t i = 0; i < written; ++i) out += (i == 0 ? "" : ", ") + arguments_[i].value;
  return out + ">";
}

std::vector<std::string> TemplateArguments::names() const {
  std::vector<std::string> out;
  for (const Argument& argument : arguments_) out.push_back(argument.name);
  return out;
}

std::vector<std::string> TemplateArguments::defaults() const {
  std::vector<std::string> out;
  for (const Argument& argument : arguments_) out.push_back(argument.fallback);
  return out;
}

}  // namespace flashjit::kernels
