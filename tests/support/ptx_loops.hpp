#pragma once
// Reading a kernel's loops from its PTX: which global loads sit inside the loops that issue a
// given instruction (a copy, a tensor-core product), where their latency is on the loop's path.
#include <algorithm>
#include <cstddef>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace flashjit::testing {

/// A loop of PTX: the lines [begin, end] between a label and the branch back to it.
struct PtxLoop {
  std::size_t begin, end;
  bool contains(const PtxLoop& other) const {
    return begin <= other.begin && other.end <= end && (begin != other.begin || end != other.end);
  }
};

/// The lines of `ptx` that read global memory (ld.global) inside a loop (a label and a later
/// branch back to it) whose lines hold `marker`. With `nested_only`, only those in such a loop
/// that lies inside another such loop.
inline std::vector<std::string> global_loads_in_loops(const std::string& ptx,
                                                      const std::string& marker,
                                                      bool nested_only = false) {
  std::vector<std::string> lines;
  for (std::size_t start = 0; start < ptx.size();) {
    const std::size_t end = std::min(ptx.find('\n', start), ptx.size());
    lines.push_back(ptx.substr(start, end - start));
    start = end + 1;
  }
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
    const bool marked = std::any_of(
        lines.begin() + static_cast<std::ptrdiff_t>(target->second),
        lines.begin() + static_cast<std::ptrdiff_t>(i) + 1,
        [&](const std::string& line) { return line.find(marker) != std::string::npos; });
    if (marked) loops.push_back({target->second, i});
  }
  std::set<std::string> found;
  for (const PtxLoop& loop : loops) {
    const bool nested = std::any_of(loops.begin(), loops.end(),
                                    [&](const PtxLoop& outer) { return outer.contains(loop); });
    if (nested_only && !nested) continue;
    for (std::size_t line = loop.begin; line <= loop.end; ++line) {
      if (lines[line].find("ld.global") != std::string::npos) found.insert(lines[line]);
    }
  }
  return {found.begin(), found.end()};
}

}  // namespace flashjit::testing
