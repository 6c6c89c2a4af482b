#pragma once
// The CI rule for a test that cannot run here (tests/support/skip.sh is the shell side): outside CI
// it skips with the reason; under CI (CI=true or CI=1) it fails with it. GPU tests skip everywhere
// and do not use this.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string_view>

namespace idist::test {

/// True under CI=true or CI=1, as CI services set it.
inline bool in_ci() {
  const char* v = std::getenv("CI");
  return v && (std::string_view(v) == "true" || std::string_view(v) == "1");
}

}  // namespace idist::test

/// In a TEST body: ends the test as skipped with `reason` outside CI, as failed under CI.
#define IDIST_SKIP_OR_FAIL_IN_CI(reason)                                                             \
  do {                                                                                               \
    if (::idist::test::in_ci()) FAIL() << "cannot run here, and CI forbids skipping it: " << reason; \
    GTEST_SKIP() << reason;                                                                          \
  } while (0)
