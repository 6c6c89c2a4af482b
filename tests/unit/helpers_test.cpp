// one_rank_only and one_rank_first on the serial model (world of one rank).
#include <gtest/gtest.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "idist/idist.hpp"

namespace {

TEST(OneRankOnly, ReturnsTheResultAsOptionalOnTheChosenRank) {
  int calls = 0;
  auto twice = idist::one_rank_only([&](int x) {
    ++calls;
    return 2 * x;
  });
  auto r = twice(21);
  static_assert(std::is_same_v<decltype(r), std::optional<int>>);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, 42);
  EXPECT_EQ(calls, 1);

  // Arguments are forwarded (here: by reference).
  auto append = idist::one_rank_only([](std::string& s) {
    s += "!";
    return s.size();
  });
  std::string s = "hi";
  EXPECT_EQ(append(s), std::optional<std::size_t>(3));
  EXPECT_EQ(s, "hi!");
}

TEST(OneRankOnly, OtherRanksGetNulloptAndDoNotRun) {
  int calls = 0;
  auto on_rank_1 = idist::one_rank_only([&] { return ++calls; }, 1);
  EXPECT_EQ(on_rank_1(), std::nullopt);
  EXPECT_EQ(calls, 0);
}

TEST(OneRankOnly, VoidFunctionsGiveAVoidCallable) {
  int calls = 0;
  auto bump = idist::one_rank_only([&] { ++calls; });
  static_assert(std::is_void_v<decltype(bump())>);
  bump();
  bump();
  EXPECT_EQ(calls, 2);
  auto elsewhere = idist::one_rank_only([&] { ++calls; }, 3);
  elsewhere();
  EXPECT_EQ(calls, 2);
}

TEST(OneRankOnly, WithBarrier) {
  int calls = 0;
  auto f = idist::one_rank_only(
      [&](int a, int b) {
        calls += a + b;
        return calls;
      },
      0, true);
  EXPECT_EQ(f(1, 2), std::optional<int>(3));
  auto g = idist::one_rank_only([&] { ++calls; }, 0, true);
  g();
  EXPECT_EQ(calls, 4);
}

TEST(OneRankFirst, RunsTheBlockAndReturnsTheResult) {
  int runs = 0;
  {
    idist::OneRankFirst guard;
    ++runs;
  }
  {
    idist::OneRankFirst guard(0, /*local=*/true);
    ++runs;
  }
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(idist::one_rank_first([] { return std::string("ready"); }), "ready");
  EXPECT_EQ(idist::one_rank_first([] { return 5; }, 0, true), 5);
  int x = 0;
  int& ref = idist::one_rank_first([&]() -> int& { return x; });
  EXPECT_EQ(&ref, &x);
}

void expect_out_of_range(int rank, bool local) {
  const std::string expected = "rank should be between 0 and 0, but given " + std::to_string(rank);
  try {
    idist::OneRankFirst guard(rank, local);
    FAIL() << "OneRankFirst(" << rank << ", " << local << ") did not throw";
  } catch (const idist::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
  bool ran = false;
  EXPECT_THROW(idist::one_rank_first([&] { ran = true; }, rank, local), idist::ValueError);
  EXPECT_FALSE(ran);
}

TEST(OneRankFirst, OutOfRangeRankIsAValueError) {
  for (int rank : {1, 2, -1, 100}) {
    expect_out_of_range(rank, false);
    expect_out_of_range(rank, true);
  }
}

TEST(OneRankFirst, ExceptionsFromTheBlockPropagate) {
  EXPECT_THROW(
      {
        idist::OneRankFirst guard;
        throw std::runtime_error("boom");
      },
      std::runtime_error);
  EXPECT_THROW(idist::one_rank_first([]() -> int { throw std::out_of_range("x"); }), std::out_of_range);
  // Still usable afterwards.
  EXPECT_EQ(idist::one_rank_first([] { return 1; }), 1);
}

}  // namespace
