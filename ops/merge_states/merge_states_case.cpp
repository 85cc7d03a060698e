#include "merge_states_case.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <stdexcept>

#include "cases/unit_roundoff.hpp"

namespace flashjit::testing {
namespace {

using reference::ForwardResult;
using reference::KeyRange;

/// Host bytes of a tensor of one dtype, indexed by element.
struct HostBytes {
  DType dtype;
  std::vector<unsigned char> bytes;

  HostBytes(DType type, std::int64_t elements)
      : dtype(type), bytes(static_cast<std::size_t>(elements) * dtype_size(type), 0xff) {}

  void set(std::int64_t i, double value) {
    const auto f = static_cast<float>(value);
    unsigned char* at = &bytes[static_cast<std::size_t>(i) * dtype_size(dtype)];
    if (dtype == DType::f32) return std::memcpy(at, &f, 4), void();
    const std::uint16_t bits =
        dtype == DType::f16 ? f16_bits_from_float(f) : bf16_bits_from_float(f);
    std::memcpy(at, &bits, 2);
  }
  double get(std::int64_t i) const {
    const unsigned char* at = &bytes[static_cast<std::size_t>(i) * dtype_size(dtype)];
    if (dtype == DType::f32) {
      float f;
      std::memcpy(&f, at, 4);
      return f;
    }
    std::uint16_t bits;
    std::memcpy(&bits, at, 2);
    return dtype == DType::f16 ? float_from_f16_bits(bits) : float_from_bf16_bits(bits);
  }
  bool poisoned(std::int64_t i) const {
    const auto size = dtype_size(dtype);
    const auto begin =
        bytes.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(i) * size);
    return std::all_of(begin, begin + static_cast<std::ptrdiff_t>(size),
                       [](unsigned char b) { return b == 0xff; });
  }
};

/// Where the case's tensors live, in elements: O rows padded by 8 and each partial 16 apart
/// when strided; LSEs token-major dense, or heads-major (as forward() writes them) when strided.
struct Layout {
  std::int64_t tokens, heads, head_dim, partials;
  std::int64_t head_stride, token_stride, partial_stride;  // of O
  std::int64_t lse_token_stride, lse_head_stride, lse_partial_stride;

  Layout(const MergeStatesCase& c) {
    const reference::Problem& p = c.problem;
    tokens = p.batch * p.seqlen_q, heads = p.heads_q, head_dim = p.head_dim;
    partials = c.partials;
    head_stride = head_dim + (c.strided ? 8 : 0);
    token_stride = heads * head_stride;
    partial_stride = tokens * token_stride + (c.strided ? 16 : 0);
    lse_token_stride = c.strided ? 1 : heads;
    lse_head_stride = c.strided ? tokens : 1;
    lse_partial_stride = tokens * heads;
  }
  std::int64_t o_at(std::int64_t t, std::int64_t h, std::int64_t d) const {
    return t * token_stride + h * head_stride + d;
  }
  std::int64_t lse_at(std::int64_t t, std::int64_t h) const {
    return t * lse_token_stride + h * lse_head_stride;
  }
  TensorView o_view(void* data, DType dtype) const {
    return TensorView::strided(data, dtype, {tokens, heads, head_dim},
                               {token_stride, head_stride, 1});
  }
  TensorView lse_view(void* data) const {
    return TensorView::strided(data, DType::f32, {tokens, heads},
                               {lse_token_stride, lse_head_stride});
  }
};

std::vector<KeyRange> random_splits(const MergeStatesCase& c) {
  std::mt19937_64 rng(c.seed);
  std::uniform_int_distribution<std::int64_t> cut(0, c.problem.seqlen_k);
  const int random_parts = c.empty_partial ? c.partials - 1 : c.partials;
  std::vector<std::int64_t> cuts = {0, c.problem.seqlen_k};
  for (int i = 1; i < random_parts; ++i) cuts.push_back(cut(rng));
  std::sort(cuts.begin(), cuts.end());
  std::vector<KeyRange> splits;
  if (c.empty_partial) splits.push_back({0, 0});
  for (std::size_t i = 0; i + 1 < cuts.size(); ++i) splits.push_back({cuts[i], cuts[i + 1]});
  return splits;
}

/// Partial `part` written into `o` and `lse` at `layout`'s offsets, partial index `slot`. A row
/// the partial saw no key of gets O = NaN instead of 0: it must contribute nothing, not even
/// a NaN through a zero weight.
void write_partial(const MergeStatesCase& c, const Layout& layout, const ForwardResult& part,
                   std::int64_t slot, HostBytes& o, std::vector<float>& lse) {
  const reference::Problem& p = c.problem;
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t i = 0; i < p.seqlen_q; ++i)
      for (std::int64_t h = 0; h < p.heads_q; ++h) {
        const std::int64_t t = b * p.seqlen_q + i;
        const double part_lse = part.lse_at(b, h, i);
        lse[static_cast<std::size_t>(slot * layout.lse_partial_stride + layout.lse_at(t, h))] =
            static_cast<float>(part_lse);
        for (std::int64_t d = 0; d < p.head_dim; ++d) {
          const double value = std::isinf(part_lse) ? std::nan("") : part.out(b, i, h, d);
          o.set(slot * layout.partial_stride + layout.o_at(t, h, d), value);
        }
      }
}

double max_finite_lse(const std::vector<float>& lse) {
  double largest = 0;
  for (float x : lse)
    largest = std::isfinite(x) ? std::max(largest, std::fabs(double(x))) : largest;
  return largest;
}

struct Outputs {
  HostBytes o;
  std::vector<float> lse;
};

Outputs run_on(Runtime& runtime, const MergeStatesCase& c, const Layout& layout,
               const HostBytes& partial_o, const std::vector<float>& partial_lse) {
  auto upload = [&](const void* data, std::size_t bytes) {
    DeviceBuffer buffer = runtime.allocate(bytes);
    runtime.copy_to_device(buffer.data(), data, bytes);
    return buffer;
  };
  Outputs out{HostBytes(c.output, layout.tokens * layout.token_stride),
              std::vector<float>(static_cast<std::size_t>(layout.lse_partial_stride))};
  std::memset(out.lse.data(), 0xff, out.lse.size() * sizeof(float));
  const std::size_t o_bytes = out.o.bytes.size(), lse_bytes = out.lse.size() * sizeof(float);
  if (c.in_place) {  // a = partial 0, b = partial 1, each in a buffer of its own
    DeviceBuffer o_a = upload(partial_o.bytes.data(), o_bytes);
    DeviceBuffer o_b =
        upload(partial_o.bytes.data() + layout.partial_stride * dtype_size(c.input), o_bytes);
    DeviceBuffer lse_a = upload(partial_lse.data(), lse_bytes);
    DeviceBuffer lse_b = upload(partial_lse.data() + layout.lse_partial_stride, lse_bytes);
    runtime.merge_state_in_place(layout.o_view(o_a.data(), c.input), layout.lse_view(lse_a.data()),
                                 layout.o_view(o_b.data(), c.input), layout.lse_view(lse_b.data()));
    runtime.synchronize();
    runtime.copy_to_host(out.o.bytes.data(), o_a.data(), o_bytes);
    runtime.copy_to_host(out.lse.data(), lse_a.data(), lse_bytes);
    return out;
  }
  DeviceBuffer parts_o = upload(partial_o.bytes.data(), partial_o.bytes.size());
  DeviceBuffer parts_lse = upload(partial_lse.data(), partial_lse.size() * sizeof(float));
  DeviceBuffer o = upload(out.o.bytes.data(), o_bytes);
  DeviceBuffer lse = upload(out.lse.data(), lse_bytes);
  const TensorView parts_o_view = TensorView::strided(
      parts_o.data(), c.input, {layout.partials, layout.tokens, layout.heads, layout.head_dim},
      {layout.partial_stride, layout.token_stride, layout.head_stride, 1});
  const TensorView parts_lse_view = TensorView::strided(
      parts_lse.data(), DType::f32, {layout.partials, layout.tokens, layout.heads},
      {layout.lse_partial_stride, layout.lse_token_stride, layout.lse_head_stride});
  runtime.merge_states(parts_o_view, parts_lse_view, layout.o_view(o.data(), c.output),
                       c.write_lse ? layout.lse_view(lse.data()) : TensorView{});
  runtime.synchronize();
  runtime.copy_to_host(out.o.bytes.data(), o.data(), o_bytes);
  runtime.copy_to_host(out.lse.data(), lse.data(), lse_bytes);
  return out;
}

}  // namespace

std::string MergeStatesCase::name() const {
  std::ostringstream s;
  s << "p" << partials << ".b" << problem.batch << ".q" << problem.seqlen_q << ".k"
    << problem.seqlen_k << ".h" << problem.heads_q << ".d" << problem.head_dim << "."
    << dtype_name(input) << "to" << dtype_name(output) << (problem.causal ? ".causal" : "")
    << (in_place ? ".in_place" : "") << (strided ? ".strided" : "")
    << (empty_partial ? ".empty_partial" : "") << (write_lse ? "" : ".no_lse") << ".seed" << seed;
  return s.str();
}

std::string MergeStatesVerdict::describe() const {
  std::ostringstream s;
  s << "splits:";
  for (const KeyRange& r : splits) s << " [" << r.begin << ", " << r.end << ")";
  s << "\n" << out.describe() << "\n(O's bound: " << bound << ")\n" << lse.describe();
  return s.str();
}

MergeStatesVerdict run_merge_states_case(Runtime& runtime, const MergeStatesCase& c) {
  if (c.in_place && (c.partials != 2 || c.output != c.input)) {
    throw std::invalid_argument("an in-place case merges 2 partials of one dtype");
  }
  const reference::Problem& p = c.problem;
  const reference::Tensor4 q =
      reference::random_tensor(p.q_shape(), reference::Layout::bshd, c.seed);
  const reference::Tensor4 k =
      reference::random_tensor(p.kv_shape(), reference::Layout::bshd, c.seed + 1);
  const reference::Tensor4 v =
      reference::random_tensor(p.kv_shape(), reference::Layout::bshd, c.seed + 2);
  const Layout layout(c);
  MergeStatesVerdict verdict;
  verdict.splits = random_splits(c);
  HostBytes partial_o(c.input, layout.partials * layout.partial_stride);
  std::vector<float> partial_lse(
      static_cast<std::size_t>(layout.partials * layout.lse_partial_stride));
  for (std::size_t i = 0; i < verdict.splits.size(); ++i) {
    const ForwardResult part =
        reference::forward(p, q.view(), k.view(), v.view(), verdict.splits[i]);
    write_partial(c, layout, part, static_cast<std::int64_t>(i), partial_o, partial_lse);
  }
  const Outputs out = run_on(runtime, c, layout, partial_o, partial_lse);

  const ForwardResult whole = reference::forward(p, q.view(), k.view(), v.view());
  std::vector<double> o_actual, o_expected, lse_actual, lse_expected;
  bool padding_untouched = true;
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t i = 0; i < p.seqlen_q; ++i)
      for (std::int64_t h = 0; h < p.heads_q; ++h) {
        const std::int64_t t = b * p.seqlen_q + i;
        for (std::int64_t d = 0; d < p.head_dim; ++d) {
          o_actual.push_back(out.o.get(layout.o_at(t, h, d)));
          o_expected.push_back(whole.out(b, i, h, d));
        }
        for (std::int64_t d = p.head_dim; d < layout.head_stride; ++d) {
          padding_untouched &= out.o.poisoned(layout.o_at(t, h, d));
        }
        lse_actual.push_back(out.lse[static_cast<std::size_t>(layout.lse_at(t, h))]);
        lse_expected.push_back(whole.lse_at(b, h, i));
      }
  const double fp32 = unit_roundoff(DType::f32);
  const double lse_term = 8 * fp32 * (1 + max_finite_lse(partial_lse));
  verdict.bound = 2 * (unit_roundoff(c.input) + unit_roundoff(c.output)) + lse_term;
  verdict.out = reference::check_close(o_actual, o_expected, verdict.bound, "O");
  const bool lse_written = c.write_lse || c.in_place;
  const double lse_bound = lse_term + 16 * fp32 * c.partials;
  if (lse_written) {
    verdict.lse = reference::check_close(lse_actual, lse_expected, lse_bound, "LSE");
  } else {
    verdict.lse.ok = true;
    verdict.lse.report = "LSE: not asked for";
  }
  const bool lse_untouched = lse_written || std::all_of(lse_actual.begin(), lse_actual.end(),
                                                        [](double x) { return std::isnan(x); });
  verdict.ok = verdict.out.ok && verdict.lse.ok && padding_untouched && lse_untouched;
  if (!padding_untouched) verdict.out.report += "\nO's row padding was written";
  if (!lse_untouched) verdict.lse.report += "\nLSE was written though the call skipped it";
  return verdict;
}

}  // namespace flashjit::testing
