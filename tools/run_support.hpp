#pragma once
// What the ops' `flashjit run` cases share: the attention shape the run options describe,
// checked against the library's limits and this machine's memory, and the run's last line.
#include <CLI/CLI.hpp>
#include <chrono>
#include <string>

#include "attention/check/attention_reference.hpp"
#include "flashjit/attention.hpp"
#include "op_commands.hpp"

namespace flashjit::tools {

/// CLI11 checks of a run option's text: a whole number of at least 1; a whole number from 0 to
/// 2^64 - 1 (a seed).
const CLI::Validator& positive_whole_number();
const CLI::Validator& whole_number();

/// The shape options as an attention descriptor (heads_kv and seqlen_k defaulted).
Attention attention_of(const RunShape& shape);

/// Throws InvalidArgument naming the run option (--batch, --heads, ...) that set a field of
/// `attention` the library refuses (head dims up to 576 with `wide_head_dims`: the inference
/// forward's).
void check_run_sizes(const Attention& attention, bool wide_head_dims = false);

/// The shape options as the float64 reference's problem, after check_run_sizes and a check
/// that the run's tensors (in the kernel's dtype, float64 and on the device: about 32 bytes per
/// element of Q, K, V and O) fit in half of this machine's memory, else InvalidArgument naming
/// the longer sequence's option (it would end in std::bad_alloc, or in swapping).
reference::Problem checked_problem(const RunShape& shape, bool wide_head_dims = false);

/// Milliseconds since `start`.
double elapsed_ms(std::chrono::steady_clock::time_point start);

/// Prints the last line, PASS or FAIL with `verdict`, and returns the exit code (1 on FAIL).
/// `timed` says what the time covers ("kernel and check").
int conclude(bool ok, const std::string& verdict, const char* timed, double elapsed_ms);

}  // namespace flashjit::tools
