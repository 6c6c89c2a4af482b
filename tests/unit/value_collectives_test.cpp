// Collectives on C++ values that a first program reaches for: unsigned integers (std::size_t,
// unsigned, std::uint16_t ...) reduced exactly with wrap-around, and the safe-mode broadcast of a
// value every rank passes. Run serially and at 2 ranks on mpi and on gloo (tests/unit/CMakeLists.txt).
// Expected values are folded here over every rank's input with the same unsigned arithmetic.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "idist/idist.hpp"

namespace {

int rank() { return idist::get_rank(); }
int world() { return idist::get_world_size(); }

// a * b modulo 2^bits of T, computed in 64 bits (exact for every width up to 64).
template <class T>
T wrap_mul(T a, T b) {
  return T(std::uint64_t(a) * std::uint64_t(b));
}

// The op applied over the inputs of ranks 0 .. world - 1, in T's own unsigned arithmetic.
template <class T, class Input>
T fold(idist::ReduceOp op, Input input) {
  T acc = input(0);
  for (int r = 1; r < world(); ++r) {
    const T v = input(r);
    switch (op) {
      case idist::ReduceOp::Sum: acc = T(acc + v); break;
      case idist::ReduceOp::Product: acc = wrap_mul(acc, v); break;
      case idist::ReduceOp::Min: acc = v < acc ? v : acc; break;
      case idist::ReduceOp::Max: acc = v > acc ? v : acc; break;
      case idist::ReduceOp::And: acc = T(acc & v); break;
      case idist::ReduceOp::Or: acc = T(acc | v); break;
    }
  }
  return acc;
}

template <class T>
class UnsignedAllReduce : public ::testing::Test {};
using UnsignedTypes = ::testing::Types<unsigned char, std::uint16_t, std::uint32_t, std::uint64_t, std::size_t,
                                       unsigned, unsigned long, unsigned long long>;
TYPED_TEST_SUITE(UnsignedAllReduce, UnsignedTypes);

TYPED_TEST(UnsignedAllReduce, ScalarsUnderEveryOpAreExact) {
  using T = TypeParam;
  constexpr T top = std::numeric_limits<T>::max();
  constexpr T high = T(T(1) << (std::numeric_limits<T>::digits - 1));  // above the signed maximum
  // Near the top: the sum wraps around at 2 ranks and more.
  const auto near_top = [&](int r) { return T(top - T(r)); };
  // Rank 0 holds a value with the high bit set, the others small ones: a signed comparison would
  // take rank 0's for the minimum and another's for the maximum.
  const auto mixed = [&](int r) { return r == 0 ? T(high + 1) : T(r + 1); };
  // Large factors: the product wraps around.
  const auto factors = [&](int r) { return T(high / 3 + T(2 * r + 1)); };
  const auto bits = [&](int r) { return T(T(0xA5 ^ (r * 0x0F)) | T(high >> (r % 2))); };

  EXPECT_EQ(idist::all_reduce(near_top(rank())), (fold<T>(idist::ReduceOp::Sum, near_top)));
  EXPECT_EQ(idist::all_reduce(mixed(rank()), idist::ReduceOp::Min), (fold<T>(idist::ReduceOp::Min, mixed)));
  EXPECT_EQ(idist::all_reduce(mixed(rank()), idist::ReduceOp::Max), (fold<T>(idist::ReduceOp::Max, mixed)));
  EXPECT_EQ(idist::all_reduce(mixed(rank()), "MAX"), T(high + 1));
  EXPECT_EQ(idist::all_reduce(factors(rank()), idist::ReduceOp::Product), (fold<T>(idist::ReduceOp::Product, factors)));
  EXPECT_EQ(idist::all_reduce(bits(rank()), idist::ReduceOp::And), (fold<T>(idist::ReduceOp::And, bits)));
  EXPECT_EQ(idist::all_reduce(bits(rank()), idist::ReduceOp::Or), (fold<T>(idist::ReduceOp::Or, bits)));
  if (world() > 1) {
    // The wrap-around itself: (top) + (top - 1) + ... is below top once it wrapped.
    EXPECT_LT(idist::all_reduce(near_top(rank())), top);
    EXPECT_EQ(idist::all_reduce(mixed(rank()), idist::ReduceOp::Min), T(2));
  }
}

TYPED_TEST(UnsignedAllReduce, SpansVectorsGatherAndBroadcast) {
  using T = TypeParam;
  constexpr T top = std::numeric_limits<T>::max();
  std::vector<T> v = {T(top - T(rank())), T(rank() + 1), top};
  idist::all_reduce(v, idist::ReduceOp::Max);
  EXPECT_EQ(v, (std::vector<T>{top, T(world()), top}));

  T raw[2] = {T(1), T(top)};
  idist::all_reduce(std::span<T>(raw), idist::ReduceOp::Sum);
  EXPECT_EQ(raw[0], T(world()));
  EXPECT_EQ(raw[1], T(T(0) - T(world())));  // world * (2^bits - 1) modulo 2^bits

  const std::vector<T> gathered = idist::all_gather(T(top - T(rank())));
  ASSERT_EQ(gathered.size(), std::size_t(world()));
  for (int r = 0; r < world(); ++r) EXPECT_EQ(gathered[std::size_t(r)], T(top - T(r)));

  const int src = world() - 1;
  EXPECT_EQ(idist::broadcast(rank() == src ? top : T(0), src), top);
}

TEST(UnsignedAllReduce, SizeTLiteralCompilesAndCounts) {
  // What a program writes to count items over the ranks.
  const std::size_t n = idist::all_reduce(std::size_t{10} + std::size_t(rank()));
  EXPECT_EQ(n, std::size_t(10 * world() + world() * (world() - 1) / 2));
}

// ---------------------------------------------------------------------------------------------
// broadcast(value, src, safe_mode) with a value on every rank

TEST(SafeModeBroadcast, ScalarsWithoutTemplateArguments) {
  const int src = world() - 1;
  const double x = 0.25 + rank();  // each rank's own value; only src's may come back
  EXPECT_EQ(idist::broadcast(x, src, true), 0.25 + src);
  EXPECT_EQ(idist::broadcast(x, src, false), 0.25 + src);
  EXPECT_EQ(idist::broadcast(7 * (rank() + 1), src, true), 7 * (src + 1));
  const std::uint64_t big = std::numeric_limits<std::uint64_t>::max() - std::uint64_t(rank());
  EXPECT_EQ(idist::broadcast(big, src, true), std::numeric_limits<std::uint64_t>::max() - std::uint64_t(src));
  EXPECT_EQ(idist::broadcast(rank() == src, src, true), true);
  // The existing forms keep working.
  EXPECT_EQ(idist::broadcast(rank() == src ? std::optional<double>(1.5) : std::nullopt, src, true), 1.5);
  EXPECT_EQ(idist::broadcast<double>(rank() == src ? std::optional<double>(2.5) : std::nullopt, src, true), 2.5);
  EXPECT_EQ(idist::broadcast(x, src), 0.25 + src);
}

TEST(SafeModeBroadcast, StringsLiteralsAndPaths) {
  const int src = world() - 1;
  const std::string mine = "rank " + std::to_string(rank()) + std::string(std::size_t(rank()) * 3, '.');
  const std::string theirs = "rank " + std::to_string(src) + std::string(std::size_t(src) * 3, '.');
  EXPECT_EQ(idist::broadcast(mine, src, true), theirs);
  EXPECT_EQ(idist::broadcast(std::string(mine), src, false), theirs);
  EXPECT_EQ(idist::broadcast(rank() == src ? "from the source" : "ignored", src, true), "from the source");
  const std::filesystem::path p = std::filesystem::path("/tmp") / ("r" + std::to_string(rank()));
  EXPECT_EQ(idist::broadcast(p, src, true), std::filesystem::path("/tmp") / ("r" + std::to_string(src)));
  EXPECT_EQ(idist::broadcast(rank() == src ? std::optional<std::string>("s") : std::nullopt, src, true), "s");
}

TEST(SafeModeBroadcast, ASourceRankOutsideTheWorldIsAValueError) {
  EXPECT_THROW(idist::broadcast(1.0, world(), true), idist::ValueError);
  EXPECT_THROW(idist::broadcast(std::string("x"), -1, true), idist::ValueError);
}

}  // namespace
