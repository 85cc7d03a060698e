#pragma once
// Reading what a kernel's loops do from its PTX: the lines, and the loops (a label and a later
// branch back to it) whose lines hold a given instruction. Tests use them to check that no
// global load sits where its latency would stall the loop (the decode kernel's copies, the
// Hopper backward's softmax).
#include <cstddef>
#include <string>
#include <vector>

namespace flashjit::testing {

/// `ptx`'s lines, in order.
std::vector<std::string> ptx_lines(const std::string& ptx);

/// A loop of PTX: the lines [begin, end] between a label and the branch back to it.
struct PtxLoop {
  std::size_t begin, end;
  /// Whether `other` lies inside this loop and is not this loop.
  bool contains(const PtxLoop& other) const {
    return begin <= other.begin && other.end <= end && (begin != other.begin || end != other.end);
  }
};

/// The loops of `lines` with a line holding each of `instructions` (substrings).
std::vector<PtxLoop> ptx_loops_with(const std::vector<std::string>& lines,
                                    const std::vector<std::string>& instructions);

}  // namespace flashjit::testing
