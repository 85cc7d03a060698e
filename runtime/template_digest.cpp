#include "template_digest.hpp"

#include <algorithm>

#include "hashing.hpp"

namespace flashjit::detail {

std::string template_digest(std::vector<TemplateFile> files) {
  std::sort(files.begin(), files.end(),
            [](const TemplateFile& a, const TemplateFile& b) { return a.name < b.name; });
  KeyBuilder key;
  for (const TemplateFile& file : files) key.add(file.name).add(file.text);
  return key.hex_digest();
}

}  // namespace flashjit::detail
