#pragma once
// The scaffolding of the ops' bad-argument tests (tests/ops/test_*_arguments.cpp): the
// check that an InvalidArgument names the argument at fault, and a table of ways to break a
// valid call, each run in a SUBCASE of its own. Header-only: it holds doctest assertions and
// templates, and every test binary that uses it already links doctest.
#include <doctest/doctest.h>

#include <functional>
#include <initializer_list>
#include <string>

#include "flashjit/error.hpp"

namespace flashjit::testing {

/// Fails unless `call` raises InvalidArgument naming `argument`, both as argument() and in the
/// message (which is what a user reads), and saying `says` when given.
inline void check_names(const std::function<void()>& call, const std::string& argument,
                        const std::string& says = "") {
  try {
    call();
    FAIL("no error; expected one naming " << argument);
  } catch (const InvalidArgument& error) {
    CHECK_MESSAGE(error.argument() == argument, error.what());
    CHECK(std::string(error.what()).find(argument) != std::string::npos);
    CHECK_MESSAGE(std::string(error.what()).find(says) != std::string::npos, error.what());
  }
}

/// One way to break a valid call: the SUBCASE's name, the change, and the argument the error
/// must name.
template <class Call>
struct BadArgument {
  const char* name;
  std::function<void(Call&)> breaks;
  const char* argument;
};

/// The checks of a bad-argument test's call fixture, mixed in by deriving `Call` from
/// ArgumentChecks<Call>; `Call::validate()` runs the op's argument checks.
template <class Call>
struct ArgumentChecks {
  /// Fails unless validating the call raises InvalidArgument naming `argument`.
  void rejects(const std::string& argument) const {
    check_names([&] { static_cast<const Call&>(*this).validate(); }, argument);
  }

  /// Runs each of `cases` in a SUBCASE of its own: breaks the call the case's way and checks
  /// that validation names the case's argument. doctest reruns the test case from the top for
  /// each subcase, so every case starts from the same valid call; the subcases share this line
  /// and are told apart by their names, which must differ.
  void rejects_each(std::initializer_list<BadArgument<Call>> cases) {
    for (const BadArgument<Call>& bad : cases) {
      SUBCASE(bad.name) {
        bad.breaks(static_cast<Call&>(*this));
        rejects(bad.argument);
      }
    }
  }
};

}  // namespace flashjit::testing
