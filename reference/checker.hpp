// The one checker every kernel test uses: compares a computed array against the float64
// reference by relative L2 error, handles non-finite values explicitly, and prints the first
// mismatches so a failing test says where it went wrong.
//
// Rules for non-finite values:
// - NaN in `actual` (or in `expected`) always fails.
// - An expected +inf or -inf (e.g. LSE = -inf of a fully masked row) must be matched by the
//   same infinity; an infinity in `actual` where a finite value is expected fails.
// - Non-finite positions are left out of the L2 sums; each mismatch among them is counted.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>

namespace flashjit::reference {

/// Outcome of one comparison. Print it (or `describe()`) to see why it failed.
struct CheckResult {
  bool ok = false;                   ///< rel_l2 <= tolerance, no non-finite mismatch, sizes equal
  double rel_l2 = 0.0;               ///< ||a - e||_2 / ||e||_2 over finite positions
  bool l2_is_absolute = false;       ///< ||e||_2 = 0, so rel_l2 holds the absolute ||a - e||_2
  double max_abs = 0.0;              ///< max |a - e| over finite positions
  int64_t nonfinite_mismatches = 0;  ///< NaNs, and infinities not matched exactly
  int64_t mismatches = 0;            ///< elements listed as wrong (see check_close)
  int64_t count = 0;                 ///< elements compared
  std::string report;                ///< a summary line, then up to 6 mismatches

  /// The human-readable report: the summary line and the first mismatches.
  const std::string& describe() const { return report; }
};

/// Writes `result.describe()`, so doctest's INFO/CHECK_MESSAGE can show it.
std::ostream& operator<<(std::ostream& os, const CheckResult& result);

/// Compares `actual` with the float64 `expected`, element by element in flat order.
/// `ok` when the sizes match, there is no non-finite mismatch, and rel_l2 <= tolerance.
/// An element is reported as a mismatch when it is a non-finite mismatch or when
/// |a - e| > tolerance * rms(e) (tolerance alone when rms(e) = 0): an error that, were every
/// element as wrong, would fail the L2 test. `label` names the array in the report.
CheckResult check_close(std::span<const double> actual, std::span<const double> expected,
                        double tolerance, std::string_view label = {});

/// As above, for an fp32 result (each value is widened to double exactly).
CheckResult check_close(std::span<const float> actual, std::span<const double> expected,
                        double tolerance, std::string_view label = {});

}  // namespace flashjit::reference
