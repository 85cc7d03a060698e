#include "common/memory_overlap.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace flashjit::kernels {
namespace {

__extension__ using wide = __int128;  // sums of two views' byte offsets stay exact

/// One term c · t of the byte difference between an element of `a` and one of `b`, with the
/// integer t in [lo, hi]. Steps of equal size in the two views merge into one term whose t is
/// the difference of the two indices.
struct Term {
  wide step;  // bytes, > 0
  wide lo, hi;
};

/// Searches for t with Σ step·t in [target_lo, target_hi], the largest steps first: the
/// smaller terms' reach bounds the choices of each t to a range, which for nested strides holds
/// one or two values. Gives up (returns false with `exhausted`) after `budget` visits.
class Search {
 public:
  explicit Search(std::vector<Term> terms) : terms_(std::move(terms)) {
    std::sort(terms_.begin(), terms_.end(),
              [](const Term& x, const Term& y) { return x.step > y.step; });
    reach_lo_.assign(terms_.size() + 1, 0);
    reach_hi_.assign(terms_.size() + 1, 0);
    for (std::size_t k = terms_.size(); k-- > 0;) {
      reach_lo_[k] = reach_lo_[k + 1] + terms_[k].step * terms_[k].lo;
      reach_hi_[k] = reach_hi_[k + 1] + terms_[k].step * terms_[k].hi;
    }
  }

  bool solvable(wide target_lo, wide target_hi) { return visit(0, target_lo, target_hi); }
  bool exhausted() const { return budget_ < 0; }

 private:
  static wide floor_div(wide x, wide y) { return x / y - ((x % y != 0) && ((x < 0) != (y < 0))); }
  static wide ceil_div(wide x, wide y) { return -floor_div(-x, y); }

  bool visit(std::size_t k, wide target_lo, wide target_hi) {
    if (--budget_ < 0) return false;
    if (target_hi < reach_lo_[k] || target_lo > reach_hi_[k]) return false;
    if (k == terms_.size()) return true;  // 0 is within the target
    const Term& term = terms_[k];
    const wide first = std::max(term.lo, ceil_div(target_lo - reach_hi_[k + 1], term.step));
    const wide last = std::min(term.hi, floor_div(target_hi - reach_lo_[k + 1], term.step));
    for (wide t = first; t <= last && budget_ >= 0; ++t) {
      if (visit(k + 1, target_lo - term.step * t, target_hi - term.step * t)) return true;
    }
    return false;
  }

  static constexpr long kBudget = 1 << 16;
  std::vector<Term> terms_;
  std::vector<wide> reach_lo_, reach_hi_;
  long budget_ = kBudget;
};

/// The terms of (address of an element of a) − (address of an element of b), in bytes.
std::vector<Term> difference_terms(const TensorView& a, const TensorView& b) {
  std::vector<Term> terms;
  auto add = [&](const TensorView& view, bool negate) {
    const wide element = static_cast<wide>(dtype_size(view.dtype));
    for (int d = 0; d < view.rank; ++d) {
      if (view.shape[d] == 1 || view.strides[d] == 0) continue;  // no step along d
      const wide step = view.strides[d] * element, count = view.shape[d] - 1;
      const wide lo = negate ? -count : 0, hi = negate ? 0 : count;
      auto same =
          std::find_if(terms.begin(), terms.end(), [&](const Term& t) { return t.step == step; });
      if (same == terms.end()) {
        terms.push_back({step, lo, hi});
      } else {
        same->lo += lo;
        same->hi += hi;
      }
    }
  };
  add(a, false);
  add(b, true);
  return terms;
}

}  // namespace

Sharing shared_memory(const TensorView& a, const TensorView& b) {
  if (a.numel() == 0 || b.numel() == 0) return Sharing::none;
  const wide begin_a = static_cast<wide>(reinterpret_cast<std::uintptr_t>(a.data));
  const wide begin_b = static_cast<wide>(reinterpret_cast<std::uintptr_t>(b.data));
  if (begin_a + a.span_bytes() <= begin_b || begin_b + b.span_bytes() <= begin_a) {
    return Sharing::none;  // the address ranges do not even meet
  }
  // Elements [x, x + size_a) and [y, y + size_b) meet iff x − y lies in (−size_a, size_b), that
  // is Σ terms in [begin_b − begin_a − size_a + 1, begin_b − begin_a + size_b − 1].
  const wide size_a = static_cast<wide>(dtype_size(a.dtype));
  const wide size_b = static_cast<wide>(dtype_size(b.dtype));
  Search search(difference_terms(a, b));
  const wide offset = begin_b - begin_a;
  if (search.solvable(offset - size_a + 1, offset + size_b - 1)) return Sharing::some;
  return search.exhausted() ? Sharing::unproven : Sharing::none;
}

}  // namespace flashjit::kernels
