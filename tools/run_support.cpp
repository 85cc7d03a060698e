#include "run_support.hpp"

#include <unistd.h>

#include <charconv>
#include <cstdint>
#include <cstdio>

#include "flashjit/error.hpp"
#include "format.hpp"

namespace flashjit::tools {

const CLI::Validator& whole_number() {
  static const CLI::Validator check(
      [](const std::string& text) {
        std::uint64_t value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        return error == std::errc() && end == text.data() + text.size()
                   ? std::string()
                   : "must be a whole number from 0 to 2^64 - 1, not '" + text + "'";
      },
      "N >= 0");
  return check;
}

const CLI::Validator& positive_whole_number() {
  static const CLI::Validator check(
      [](const std::string& text) {
        return text.find_first_not_of("0123456789") == std::string::npos &&
                       text.find_first_not_of('0') != std::string::npos
                   ? std::string()
                   : "must be a whole number of at least 1, not '" + text + "'";
      },
      "N >= 1");
  return check;
}

Attention attention_of(const RunShape& shape) {
  Attention a;
  a.batch = shape.batch;
  a.heads_q = shape.heads;
  a.heads_kv = shape.heads_kv > 0 ? shape.heads_kv : shape.heads;
  a.seqlen_q = shape.seqlen_q;
  a.seqlen_k = shape.seqlen_k > 0 ? shape.seqlen_k : shape.seqlen_q;
  a.head_dim = shape.head_dim;
  a.head_dim_v = shape.head_dim_v;
  a.causal = shape.causal;
  return a;
}

void check_run_sizes(const Attention& attention, bool wide_head_dims) {
  validate_attention_flags(attention,
                           {{"attention.batch", "--batch"},
                            {"attention.heads_q", "--heads"},
                            {"attention.heads_kv", "--heads-kv"},
                            {"attention.seqlen_q", "--seqlen-q"},
                            {"attention.seqlen_k", "--seqlen-k"},
                            {"attention.head_dim", "--head-dim"},
                            {"attention.head_dim_v", "--head-dim-v"}},
                           wide_head_dims);
}

namespace {

void check_host_memory(const reference::Problem& p) {
  constexpr double kBytesPerElement = 32;
  const double elements =
      double(p.batch) * double(p.head_dim + p.value_dim()) *
      (double(p.seqlen_q) * double(p.heads_q) + double(p.seqlen_k) * double(p.heads_kv));
  const double needed = elements * kBytesPerElement;
  const double memory = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  if (needed <= memory / 2) return;
  const bool keys = p.seqlen_k > p.seqlen_q;
  throw InvalidArgument(keys ? "--seqlen-k" : "--seqlen-q",
                        "is " + std::to_string(keys ? p.seqlen_k : p.seqlen_q) +
                            ": the run would need about " + format_bytes(std::uintmax_t(needed)) +
                            " of host memory for its tensors and the float64 reference; this "
                            "machine has " +
                            format_bytes(std::uintmax_t(memory)) +
                            " (a run may use half). Use a smaller shape");
}

}  // namespace

reference::Problem checked_problem(const RunShape& shape, bool wide_head_dims) {
  const Attention a = attention_of(shape);
  reference::Problem p;
  p.batch = a.batch;
  p.heads_q = a.heads_q;
  p.heads_kv = a.heads_kv;
  p.seqlen_q = a.seqlen_q;
  p.seqlen_k = a.seqlen_k;
  p.head_dim = a.head_dim;
  p.head_dim_v = a.head_dim_v;
  p.causal = a.causal;
  if (p.heads_q % p.heads_kv != 0) {
    throw InvalidArgument("--heads-kv", "must divide --heads (" + std::to_string(p.heads_q) + ")");
  }
  check_run_sizes(a, wide_head_dims);
  check_host_memory(p);
  return p;
}

double elapsed_ms(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

int conclude(bool ok, const std::string& verdict, const char* timed, double elapsed_ms) {
  if (!ok) {
    std::printf("FAIL: the result does not match the float64 reference\n%s\n", verdict.c_str());
    return 1;
  }
  std::printf("PASS: matches the float64 reference (%s in %s)\n", timed,
              format_duration_ms(elapsed_ms).c_str());
  return 0;
}

}  // namespace flashjit::tools
