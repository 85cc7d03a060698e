#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "attention/attention_forward.hpp"
#include "attention/check/attention_run.hpp"
#include "attention/check/inference_case.hpp"
#include "flashjit/error.hpp"
#include "run_support.hpp"
#include "work_report.hpp"

namespace flashjit::tools {
namespace {

/// The inference case of the options: --varlen N sequences of random lengths up to --seqlen-q
/// and --seqlen-k (0 and 1 among them), packed; or --batch sequences of exactly those lengths;
/// their keys packed, or with --paged in a cache of --page-size pages in a shuffled order; with
/// --append, the last keys of each sequence arrive in the call (rotated with --rotary), into a
/// dense or paged cache (with --varlen, sequences shorter than --append grow to it).
testing::InferenceCase inference_case(const RunContext& context, const AttentionRunFlags& flags) {
  const testing::ForwardCase shape = forward_case(context, flags);  // checks the sizes and dtype
  const reference::Problem& p = shape.problem;
  if (flags.append > p.seqlen_k) {
    throw InvalidArgument("--append", "is " + std::to_string(flags.append) +
                                          "; the appended keys are among --seqlen-k's " +
                                          std::to_string(p.seqlen_k));
  }
  if (flags.rotary && flags.rotary_interleaved) {
    throw InvalidArgument("--rotary-interleaved",
                          "is one pairing and --rotary the other; pick one");
  }
  testing::InferenceCase c;
  if (flags.varlen > 0) {
    c = testing::random_lengths_case(flags.varlen, p.seqlen_q, p.seqlen_k, shape.seed);
    c.keys = testing::KeyStorage::packed;
  } else {
    c.seqlens_q.assign(static_cast<std::size_t>(p.batch), p.seqlen_q);
    c.seqlens_k.assign(static_cast<std::size_t>(p.batch), p.seqlen_k);
    c.seed = shape.seed;
  }
  if (flags.paged) c.keys = testing::KeyStorage::paged;
  if (flags.append > 0 && flags.varlen > 0) {
    // Packed queries appending to a dense (or paged) cache: every sequence holds its new keys.
    if (!flags.paged) c.keys = testing::KeyStorage::dense;
    for (std::int64_t& keys : c.seqlens_k) keys = std::max<std::int64_t>(keys, flags.append);
  }
  c.page_size = flags.page_size;
  c.heads_q = p.heads_q;
  c.heads_kv = p.heads_kv;
  c.head_dim = p.head_dim;
  c.head_dim_v = p.head_dim_v;
  c.causal = p.causal;
  c.dtype = shape.dtype;
  c.splits = flags.splits;
  c.deterministic = flags.deterministic;
  c.append = flags.append;
  c.score_mod_text = p.score_mod_text;
  c.score_mod = p.score_mod;
  c.score_mod_slope = p.score_mod_slope;
  c.mask_mod_text = p.mask_mod_text;
  c.mask_mod = p.mask_mod;
  c.dropout_p = static_cast<float>(p.dropout_p);
  c.dropout_seed = p.dropout_seed;
  c.dropout_offset = p.dropout_offset;
  c.rotary = flags.rotary || flags.rotary_interleaved;
  c.rotary_interleaved = flags.rotary_interleaved;
  c.kv_e4m3 = flags.kv_e4m3();
  c.values_in_keys = flags.values_in_keys;
  if (flags.seqused) {  // 0 to 8 padding rows past each sequence's queries and keys
    std::mt19937_64 random(shape.seed + 17);
    std::uniform_int_distribution<std::int64_t> rows(0, 8);
    for (std::size_t b = 0; b < c.seqlens_q.size(); ++b) {
      c.unused_q.push_back(rows(random));
      c.unused_k.push_back(rows(random));
    }
  }
  return c;
}

/// The useful work of an inference case, sequence by sequence: 2 · visible pairs · (head_dim +
/// value head dim) FLOPs per query head, and each input and output moved once; an append also
/// writes its new keys and values into the cache once and reads the rotary tables' rows of its
/// positions.
struct InferenceMinimum {
  double flops = 0;
  double bytes = 0;
};
InferenceMinimum inference_minimum(const testing::InferenceCase& c) {
  InferenceMinimum m;
  for (std::size_t b = 0; b < c.seqlens_q.size(); ++b) {
    Attention a = c.attention();
    a.batch = 1;
    a.seqlen_q = c.seqlens_q[b];
    a.seqlen_k = c.seqlens_k[b];
    m.flops +=
        2.0 * kernels::visible_pairs(a) * double(c.head_dim + c.value_dim()) * double(c.heads_q);
    m.bytes += minimum_global_bytes(a, c.dtype, false);
    if (c.kv_e4m3) {  // K and V at one byte an element
      const double kv_elements =
          double(a.seqlen_k) * double(c.heads_kv) * double(c.head_dim + c.value_dim());
      m.bytes -= kv_elements * double(dtype_size(c.dtype) - 1);
    }
    if (c.values_in_keys) {  // V is K's columns: no bytes of its own
      m.bytes -= double(a.seqlen_k) * double(c.heads_kv) * double(c.value_dim()) *
                 double(dtype_size(c.dtype));
    }
    // A new key row and value row each, written into the cache once.
    const double new_rows_bytes =
        double(c.heads_kv * (c.head_dim + c.value_dim())) * double(dtype_size(c.dtype));
    m.bytes += double(c.append) * new_rows_bytes;
    if (c.rotary)
      m.bytes +=
          2.0 * double(c.append) * double(c.rotary_dim > 0 ? c.rotary_dim : c.head_dim) / 2 * 4;
  }
  return m;
}

/// "300" when every sequence has that length, else "[1,0,17]".
std::string lengths_text(const std::vector<std::int64_t>& lengths) {
  if (std::adjacent_find(lengths.begin(), lengths.end(), std::not_equal_to<>()) == lengths.end()) {
    return lengths.empty() ? "0" : std::to_string(lengths.front());
  }
  std::string text = "[";
  for (std::int64_t length : lengths) {
    if (text.size() > 1) text += ',';
    text += std::to_string(length);
  }
  return text + "]";
}

/// The inference case's shape line, as the dense runs print theirs.
void print_inference_shape(const testing::InferenceCase& c) {
  std::string extra = c.packed_q ? ", packed (varlen)" : "";
  if (c.keys == testing::KeyStorage::paged) {
    extra += ", paged (pages of " + std::to_string(c.page_size);
    extra += " keys)";
  }
  if (c.splits > 0) extra += ", splits " + std::to_string(c.splits);
  if (c.append > 0) extra += ", appending " + std::to_string(c.append) + " keys";
  if (c.rotary) extra += c.rotary_interleaved ? ", rotary (interleaved)" : ", rotary (half)";
  if (c.head_dim_v != 0) extra += ", head_dim_v " + std::to_string(c.head_dim_v);
  if (c.kv_e4m3) extra += ", e4m3 cache (descale per head)";
  if (c.values_in_keys) extra += ", V in the keys (k's first head_dim_v columns)";
  if (!c.unused_q.empty()) extra += ", padded past the used rows (seqused)";
  print_shape({.batch = static_cast<std::int64_t>(c.seqlens_q.size()),
               .heads_q = c.heads_q,
               .heads_kv = c.heads_kv,
               .head_dim = c.head_dim,
               .seqlen_q = lengths_text(c.seqlens_q),
               .seqlen_k = lengths_text(c.seqlens_k),
               .dtype = c.dtype,
               .layout = "bshd",
               .causal = c.causal,
               .extra = extra});
}

}  // namespace

int run_inference_attention(const RunContext& context, const AttentionRunFlags& flags,
                            bool backward) {
  const testing::InferenceCase c = inference_case(context, flags);
  Runtime runtime = context.open_runtime();
  print_inference_shape(c);
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  const testing::InferenceVerdict verdict = backward
                                                ? testing::run_inference_backward_case(runtime, c)
                                                : testing::run_inference_case(runtime, c);
  const double elapsed = elapsed_ms(start);
  if (runtime.backend() == Backend::emulator) {
    for (const KernelWork& kernel : runtime.emulated_work()) {
      std::printf("kernel:  %s\n", kernel.kernel.c_str());
    }
  }
  std::printf(
      "%s worst relative L2 error / bound over the sequences %.3g (each bound twice "
      "a plain %s %s's error on that sequence)\n",
      backward ? "dQ dK dV:" : "O:      ", verdict.worst_ratio,
      std::string(dtype_name(c.dtype)).c_str(), backward ? "backward" : "attention");
  if (c.kv_e4m3) {
    std::printf(
        "         against attention over the dequantized e4m3 cache (stored value times its "
        "head's descale, in float64): the bound judges the kernel; e4m3's own rounding (3 "
        "mantissa bits) is the caller's quantization\n");
  }
  if (!backward) {
    const InferenceMinimum minimum = inference_minimum(c);
    report_work(context, runtime, "", {minimum.flops, minimum.bytes});
  }
  return conclude(verdict.ok, verdict.describe(), "kernels and check", elapsed);
}

}  // namespace flashjit::tools
