#pragma once
// The digest of a template set, one field of every kernel's cache key (docs/cache.md): computed
// at build time for the embedded templates (by the flashjit_template_digest tool, so a process
// whose kernels are all cached never reads the half megabyte of template text) and at run time
// for a template directory, by this one function, so the same files give the same keys.
#include <string>
#include <string_view>
#include <vector>

namespace flashjit::detail {

/// One template as NVRTC sees it: its include name ("softmax/softmax_kernel.cuh") and text.
struct TemplateFile {
  std::string name;
  std::string_view text;
};

/// 32 hex digits of XXH3-128 over every file's name and bytes, in name order.
std::string template_digest(std::vector<TemplateFile> files);

}  // namespace flashjit::detail
