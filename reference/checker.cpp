#include "checker.hpp"

#include <algorithm>
#include <cmath>
#include <ostream>
#include <sstream>
#include <vector>

namespace flashjit::reference {

namespace {

constexpr int64_t kMaxListed = 6;  // keeps the report to about 8 lines

// Why a pair with a non-finite member is wrong, or nullptr when it is right or both are finite.
const char* nonfinite_problem(double actual, double expected) {
  if (std::isnan(actual)) return "NaN in actual";
  if (std::isnan(expected)) return "NaN in expected";
  if (std::isinf(expected)) return actual == expected ? nullptr : "expected infinity not matched";
  if (std::isinf(actual)) return "infinity in actual";
  return nullptr;
}

bool both_finite(double actual, double expected) {
  return std::isfinite(actual) && std::isfinite(expected);
}

// Fills the error norms, max_abs and nonfinite_mismatches; returns the RMS of `expected` over
// the finite positions (the scale an element's error is judged against).
double measure(std::span<const double> actual, std::span<const double> expected,
               CheckResult& result) {
  double diff_sq = 0.0, expected_sq = 0.0;
  int64_t finite = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], e = expected[i];
    if (!both_finite(a, e)) {
      if (nonfinite_problem(a, e)) ++result.nonfinite_mismatches;
      continue;  // matched infinities are right but have no place in an L2 sum
    }
    diff_sq += (a - e) * (a - e);
    expected_sq += e * e;
    result.max_abs = std::max(result.max_abs, std::abs(a - e));
    ++finite;
  }
  result.l2_is_absolute = expected_sq == 0.0;
  result.rel_l2 = std::sqrt(result.l2_is_absolute ? diff_sq : diff_sq / expected_sq);
  return finite > 0 ? std::sqrt(expected_sq / static_cast<double>(finite)) : 0.0;
}

// Lists the first mismatches, one per line, and counts them all.
std::string list_mismatches(std::span<const double> actual, std::span<const double> expected,
                            double threshold, CheckResult& result) {
  std::ostringstream lines;
  lines.precision(10);
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], e = expected[i];
    const char* problem = nonfinite_problem(a, e);
    const bool wrong = problem || (both_finite(a, e) && std::abs(a - e) > threshold);
    if (!wrong) continue;
    if (++result.mismatches > kMaxListed) continue;
    lines << "\n  [" << i << "] actual = " << a << ", expected = " << e;
    if (problem)
      lines << " (" << problem << ")";
    else
      lines << " (|diff| = " << std::abs(a - e) << ")";
  }
  if (result.mismatches > kMaxListed)
    lines << "\n  ... and " << result.mismatches - kMaxListed << " more mismatches";
  return lines.str();
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const CheckResult& result) {
  return os << result.describe();
}

CheckResult check_close(std::span<const double> actual, std::span<const double> expected,
                        double tolerance, std::string_view label) {
  CheckResult result;
  std::ostringstream summary;
  summary.precision(3);
  summary << (label.empty() ? "array" : label) << ": ";
  if (actual.size() != expected.size()) {
    summary << "FAIL size " << actual.size() << " != expected size " << expected.size();
    result.report = summary.str();
    return result;
  }
  result.count = static_cast<int64_t>(actual.size());
  const double rms = measure(actual, expected, result);
  const double threshold = tolerance * (rms > 0.0 ? rms : 1.0);
  const std::string listed = list_mismatches(actual, expected, threshold, result);
  result.ok = result.nonfinite_mismatches == 0 && result.rel_l2 <= tolerance;
  summary << (result.ok ? "ok" : "FAIL") << std::scientific
          << (result.l2_is_absolute ? " abs_l2 = " : " rel_l2 = ") << result.rel_l2
          << " (tolerance " << tolerance << "), max_abs = " << result.max_abs
          << ", non-finite mismatches = " << result.nonfinite_mismatches << ", "
          << result.mismatches << " of " << result.count << " elements off";
  result.report = summary.str() + listed;
  return result;
}

CheckResult check_close(std::span<const float> actual, std::span<const double> expected,
                        double tolerance, std::string_view label) {
  const std::vector<double> widened(actual.begin(), actual.end());
  return check_close(std::span<const double>(widened), expected, tolerance, label);
}

}  // namespace flashjit::reference
