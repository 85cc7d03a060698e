#include "support/ptx_loops.hpp"

#include <algorithm>
#include <map>
#include <regex>

namespace flashjit::testing {

std::vector<std::string> ptx_lines(const std::string& ptx) {
  std::vector<std::string> lines;
  for (std::size_t start = 0; start < ptx.size();) {
    const std::size_t end = std::min(ptx.find('\n', start), ptx.size());
    lines.push_back(ptx.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

std::vector<PtxLoop> ptx_loops_with(const std::vector<std::string>& lines,
                                    const std::vector<std::string>& instructions) {
  std::map<std::string, std::size_t> label_line;
  const std::regex label(R"(^\s*(\$L__\w+):)"), branch(R"(\bbra(\.uni)?\s+(\$L__\w+);)");
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::smatch match;
    if (std::regex_search(lines[i], match, label)) label_line[match[1]] = i;
  }
  std::vector<PtxLoop> loops;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::smatch match;
    if (!std::regex_search(lines[i], match, branch)) continue;
    const auto target = label_line.find(match[2]);
    if (target == label_line.end() || target->second >= i) continue;  // not a back edge
    const auto first = lines.begin() + static_cast<std::ptrdiff_t>(target->second);
    const auto last = lines.begin() + static_cast<std::ptrdiff_t>(i) + 1;
    const bool holds_all =
        std::all_of(instructions.begin(), instructions.end(), [&](const std::string& wanted) {
          return std::any_of(first, last, [&](const std::string& line) {
            return line.find(wanted) != std::string::npos;
          });
        });
    if (holds_all) loops.push_back({target->second, i});
  }
  return loops;
}

}  // namespace flashjit::testing
