#pragma once
// Division by a divisor known only at run time but fixed for a whole kernel (a paged cache's
// page size), as one widening multiply and a shift: the hardware has no integer divider, and
// `n / d` compiles to a ~20-instruction sequence, which a loop that looks up a page for every
// key row pays each time. The method is Granlund and Montgomery's ("Division by invariant
// integers using multiplication", 1994, Theorem 4.2) for numerators below 2^31: with
// l = ceil(log2 d) and m = ceil(2^(31 + l) / d) (below 2^32), floor(n / d) = (n · m) >> (31 + l),
// which is the high word of (2n) · m shifted right by l: one mul.hi.u32 and a shift.
#include "tile/platform.cuh"

namespace flashjit {

class FastDivider {
 public:
  /// For `divisor` >= 1. Costs one 64-bit division, once.
  FJ_HOST_DEVICE explicit FastDivider(int divisor) : divisor_(divisor) {
    while ((1LL << log2_ceil_) < divisor) ++log2_ceil_;
    using u64 = unsigned long long;
    const u64 numerator = u64(1) << (31 + log2_ceil_);
    multiplier_ = unsigned((numerator + u64(divisor - 1)) / u64(divisor));  // rounded up
  }

  /// floor(n / divisor) for 0 <= n < 2^31.
  FJ_HOST_DEVICE int divide(int n) const {
    const unsigned doubled = unsigned(n) << 1;
#if defined(FJ_DEVICE_CODE)
    const unsigned high = __umulhi(doubled, multiplier_);
#else
    const unsigned high = unsigned((static_cast<unsigned long long>(doubled) * multiplier_) >> 32);
#endif
    return int(high >> log2_ceil_);
  }
  /// n mod divisor, given its quotient.
  FJ_HOST_DEVICE int remainder(int n, int quotient) const { return n - quotient * divisor_; }

 private:
  int divisor_;
  int log2_ceil_ = 0;
  unsigned multiplier_;
};

}  // namespace flashjit
