// support/time_scale.hpp: identity at scale 1 (no bound loosened), the factor applied to upper bounds,
// and a bad IDIST_TEST_TIME_SCALE ending the program with the reason. Each case runs in a forked child
// (gtest's death tests), since the factor is read once per process.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>

#include "support/time_scale.hpp"

namespace {

using namespace std::chrono_literals;
using idist::test::scaled;

// Exits 0 when `ok` holds in a child where IDIST_TEST_TIME_SCALE is `value` (unset when null).
template <class Check>
void in_child_with(const char* value, Check ok) {
  if (value)
    ::setenv("IDIST_TEST_TIME_SCALE", value, 1);
  else
    ::unsetenv("IDIST_TEST_TIME_SCALE");
  std::_Exit(ok() ? 0 : 1);
}

TEST(TimeScale, UnsetOrOneLeavesEveryBoundAsWritten) {
  for (const char* v : {static_cast<const char*>(nullptr), "", "1"})
    EXPECT_EXIT(in_child_with(v, [] { return scaled(1500ms) == 1500ms && scaled(2s) == 2s && scaled(0.1) == 0.1; }),
                ::testing::ExitedWithCode(0), "")
        << (v ? v : "(unset)");
}

TEST(TimeScale, MultipliesUpperBoundsRoundingUp) {
  EXPECT_EXIT(in_child_with("2.5", [] { return scaled(2s) == 5s && scaled(3s) == 8s && scaled(100ms) == 250ms; }),
              ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(in_child_with("3", [] { return scaled(0.7) > 2.09 && scaled(0.7) < 2.11; }), ::testing::ExitedWithCode(0),
              "");
}

TEST(TimeScale, ABadValueEndsTheProgramNamingIt) {
  for (const char* v : {"abc", "0.5", "0", "-2", "3x", "1000", "nan"})
    EXPECT_DEATH(in_child_with(v, [] { return scaled(1s) > 0s; }),
                 "IDIST_TEST_TIME_SCALE should be a number from 1 to 100, but given")
        << v;
}

}  // namespace
