// all_reduce on every backend and world size (ignite's _test_distrib_all_reduce and more): every
// op on every element type, op names, rejected ops, spans, vectors and the non-blocking form.
#include <chrono>
#include <functional>
#include <numeric>
#include <thread>

#include "conformance/conformance.hpp"

namespace idist::conformance {
namespace {

// Fixtures: every test reports, on every rank, the ranks where it failed.
class AllReduceBool : public Conformance {};
class AllReduceErrors : public Conformance {};
class AllReduceVectors : public Conformance {};
class AllReduceAsync : public Conformance {};

using idist::ReduceOp;
using namespace std::chrono_literals;

const ReduceOp kAllOps[] = {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Min,
                            ReduceOp::Max, ReduceOp::And,     ReduceOp::Or};

// Inputs derived from ignite's 2 * rank + 1, clipped so that the exact result fits the type:
// a rank whose term would overflow contributes the op's neutral element instead.
template <class T>
std::int64_t sum_input(int r) {
  return double(r + 1) * double(r + 1) <= exact_int_limit<T>() ? 2 * r + 1 : 0;  // partial sums are (r+1)^2
}
template <class T>
std::int64_t product_input(int r) {
  double p = 1;
  for (int i = 0; i <= r; ++i) p *= 2 * i + 1;
  return p <= exact_int_limit<T>() ? 2 * r + 1 : 1;
}
template <class T>
std::int64_t odd_input(int r) {
  return std::min<std::int64_t>(2 * r + 1, exact_int_limit_i64<T>());
}

template <class T>
double expected(ReduceOp op, const std::function<std::int64_t(int)>& input) {
  double acc = to_double(from_int<T>(input(0)));
  for (int r = 1; r < world(); ++r) {
    const double v = to_double(from_int<T>(input(r)));
    switch (op) {
      case ReduceOp::Sum: acc += v; break;
      case ReduceOp::Product: acc *= v; break;
      case ReduceOp::Min: acc = std::min(acc, v); break;
      case ReduceOp::Max: acc = std::max(acc, v); break;
      default: ADD_FAILURE() << "not an arithmetic op";
    }
  }
  return acc;
}

template <class T>
class AllReduceNumeric : public Conformance {};
TYPED_TEST_SUITE(AllReduceNumeric, NumericElementTypes);

TYPED_TEST(AllReduceNumeric, IgnitesTwoRankPlusOneUnderEachOp) {
  using T = TypeParam;
  const int r = rank(), ws = world();
  const T sum = idist::all_reduce(from_int<T>(sum_input<T>(r)));  // default op: Sum
  EXPECT_EQ(to_double(sum), expected<T>(ReduceOp::Sum, sum_input<T>)) << type_name<T>();
  if (double(ws) * ws <= exact_int_limit<T>()) {
    EXPECT_EQ(to_double(sum), double(ws) * ws);
  }

  const T prod = idist::all_reduce(from_int<T>(product_input<T>(r)), ReduceOp::Product);
  EXPECT_EQ(to_double(prod), expected<T>(ReduceOp::Product, product_input<T>)) << type_name<T>();

  const T mn = idist::all_reduce(from_int<T>(odd_input<T>(r)), ReduceOp::Min);
  EXPECT_EQ(to_double(mn), 1.0) << type_name<T>();
  const T mx = idist::all_reduce(from_int<T>(odd_input<T>(r)), ReduceOp::Max);
  EXPECT_EQ(to_double(mx), expected<T>(ReduceOp::Max, odd_input<T>)) << type_name<T>();
  if (2.0 * ws - 1 <= exact_int_limit<T>()) {
    EXPECT_EQ(to_double(mx), 2.0 * ws - 1);
  }

  // Reversed ranks: the extreme value is on the last rank, not on rank 0.
  const auto reversed = [ws](int q) { return odd_input<T>(ws - 1 - q); };
  EXPECT_EQ(to_double(idist::all_reduce(from_int<T>(reversed(r)), ReduceOp::Min)), 1.0);
  EXPECT_EQ(to_double(idist::all_reduce(from_int<T>(reversed(r)), ReduceOp::Max)),
            expected<T>(ReduceOp::Max, reversed));
}

TYPED_TEST(AllReduceNumeric, OpNamesAsIgniteStrings) {
  using T = TypeParam;
  const int r = rank();
  EXPECT_EQ(to_double(idist::all_reduce(from_int<T>(sum_input<T>(r)), "SUM")),
            expected<T>(ReduceOp::Sum, sum_input<T>));
  EXPECT_EQ(to_double(idist::all_reduce(from_int<T>(product_input<T>(r)), "PRODUCT")),
            expected<T>(ReduceOp::Product, product_input<T>));
  EXPECT_EQ(to_double(idist::all_reduce(from_int<T>(odd_input<T>(r)), "MIN")), 1.0);
  EXPECT_EQ(to_double(idist::all_reduce(from_int<T>(odd_input<T>(r)), "MAX")),
            expected<T>(ReduceOp::Max, odd_input<T>));
}

template <class T>
class AllReduceSigned : public Conformance {};
TYPED_TEST_SUITE(AllReduceSigned, SignedElementTypes);

TYPED_TEST(AllReduceSigned, NegativeValuesUnderMinAndMax) {
  using T = TypeParam;
  const auto neg = [](int q) { return -odd_input<T>(q); };
  EXPECT_EQ(to_double(idist::all_reduce(from_int<T>(neg(rank())), ReduceOp::Min)), expected<T>(ReduceOp::Min, neg));
  EXPECT_EQ(to_double(idist::all_reduce(from_int<T>(neg(rank())), ReduceOp::Max)), -1.0);
  // Mixed signs: Sum of (-1)^r * (r+1) and Product of -1 on every rank.
  const auto alternating = [](int q) { return q % 2 ? -std::int64_t(q + 1) : std::int64_t(q + 1); };
  // Any partial sum (of a subset of ranks) stays below ws^2/4 + ws in magnitude.
  if (double(world()) * world() / 4 + world() <= exact_int_limit<T>()) {
    EXPECT_EQ(to_double(idist::all_reduce(from_int<T>(alternating(rank())))), expected<T>(ReduceOp::Sum, alternating));
  }
  EXPECT_EQ(to_double(idist::all_reduce(from_int<T>(-1), "PRODUCT")), world() % 2 ? -1.0 : 1.0);
}

TYPED_TEST(AllReduceNumeric, ScalarKeepsItsCxxType) {
  using T = TypeParam;
  static_assert(std::is_same_v<decltype(idist::all_reduce(T{})), T>);
  static_assert(std::is_same_v<decltype(idist::all_reduce(T{}, ReduceOp::Max)), T>);
  static_assert(std::is_same_v<decltype(idist::all_reduce(T{}, "MIN")), T>);
  const T mx = idist::all_reduce(from_int<T>(odd_input<T>(rank())), "MAX");
  EXPECT_EQ(to_double(mx), expected<T>(ReduceOp::Max, odd_input<T>));
}

// A span where element i receives a contribution from one rank only: a backend that mixed up
// positions or lengths would fail. Even elements carry ignite's 2r+1 sum.
TYPED_TEST(AllReduceNumeric, SpanInPlaceElementwise) {
  using T = TypeParam;
  const int r = rank(), ws = world();
  const std::size_t n = 1001;
  std::vector<T> host(n);
  for (std::size_t i = 0; i < n; ++i)
    host[i] = from_int<T>(i % 2 == 0 ? sum_input<T>(r) : (int(i % std::size_t(ws)) == r ? std::int64_t(i % 7) + 1 : 0));
  SpanBuffer<T> buf(host);
  idist::all_reduce(buf.span());
  const std::vector<T> out = buf.to_host();
  const double even = expected<T>(ReduceOp::Sum, sum_input<T>);
  const auto want = [&](std::size_t i) {
    return from_int<T>(i % 2 == 0 ? std::int64_t(even) : std::int64_t(i % 7) + 1);
  };
  EXPECT_EQ(mismatch(out, n, want), "") << type_name<T>();

  // Max / Min elementwise: element i's extreme is on rank i % ws.
  for (std::size_t i = 0; i < n; ++i) host[i] = from_int<T>(int(i % std::size_t(ws)) == r ? 3 : 2);
  SpanBuffer<T> mx(host);
  idist::all_reduce(mx.span(), ReduceOp::Max);
  EXPECT_EQ(mismatch(mx.to_host(), n, [](std::size_t) { return from_int<T>(3); }), "") << type_name<T>();
  SpanBuffer<T> mn(host);
  idist::all_reduce(mn.span(), "MIN");
  EXPECT_EQ(mismatch(mn.to_host(), n, [ws](std::size_t) { return from_int<T>(ws == 1 ? 3 : 2); }), "")
      << type_name<T>();
}

TYPED_TEST(AllReduceNumeric, EmptySpanIsANoOp) {
  using T = TypeParam;
  SpanBuffer<T> buf(std::span<const T>{});
  idist::all_reduce(buf.span(), ReduceOp::Sum);
  EXPECT_TRUE(buf.to_host().empty());
  // The ranks are still in step afterwards.
  EXPECT_EQ(idist::all_reduce(1), world());
}

template <class T>
class AllReduceBitwise : public Conformance {};
TYPED_TEST_SUITE(AllReduceBitwise, IntegerElementTypes);

TYPED_TEST(AllReduceBitwise, AndOrOfTwoRankPlusOne) {
  using T = TypeParam;
  const int r = rank();
  T want_and = from_int<T>(odd_input<T>(0)), want_or = want_and;
  for (int q = 1; q < world(); ++q) {
    want_and = T(want_and & from_int<T>(odd_input<T>(q)));
    want_or = T(want_or | from_int<T>(odd_input<T>(q)));
  }
  EXPECT_EQ(idist::all_reduce(from_int<T>(odd_input<T>(r)), ReduceOp::And), want_and);
  EXPECT_EQ(idist::all_reduce(from_int<T>(odd_input<T>(r)), ReduceOp::Or), want_or);
  EXPECT_EQ(idist::all_reduce(from_int<T>(odd_input<T>(r)), "AND"), want_and);
  EXPECT_EQ(idist::all_reduce(from_int<T>(odd_input<T>(r)), "OR"), want_or);
}

// One bit per rank: Or sets exactly the ranks' bits, And of the complements clears exactly them.
TYPED_TEST(AllReduceBitwise, OneBitPerRank) {
  using T = TypeParam;
  const int bits = int(8 * sizeof(T));
  const auto bit = [bits](int q) { return T(T(1) << (q % bits)); };
  T want_or = 0;
  for (int q = 0; q < world(); ++q) want_or = T(want_or | bit(q));
  EXPECT_EQ(idist::all_reduce(bit(rank()), ReduceOp::Or), want_or);
  EXPECT_EQ(idist::all_reduce(T(~bit(rank())), ReduceOp::And), T(~want_or));
  std::vector<T> v = {bit(rank()), T(~bit(rank())), T(0), T(~T(0))};
  idist::all_reduce(v, ReduceOp::Or);
  EXPECT_EQ(v, (std::vector<T>{want_or, world() == 1 ? T(~bit(0)) : T(~T(0)), T(0), T(~T(0))}));
}

TEST_F(AllReduceBool, LogicalOps) {
  const int ws = world();
  const bool only_rank0 = rank() == 0;
  // true on rank 0 only: the "any" ops give true, the "all" ops true only in a world of one.
  EXPECT_TRUE(idist::all_reduce(only_rank0, ReduceOp::Or));
  EXPECT_TRUE(idist::all_reduce(only_rank0, ReduceOp::Max));
  EXPECT_TRUE(idist::all_reduce(only_rank0, ReduceOp::Sum));  // Sum on bool behaves as Or
  EXPECT_EQ(idist::all_reduce(only_rank0, ReduceOp::And), ws == 1);
  EXPECT_EQ(idist::all_reduce(only_rank0, ReduceOp::Min), ws == 1);
  EXPECT_EQ(idist::all_reduce(only_rank0, ReduceOp::Product), ws == 1);  // Product on bool behaves as And
  // false on the last rank only.
  const bool not_last = rank() != ws - 1;
  EXPECT_FALSE(idist::all_reduce(not_last, "AND"));
  EXPECT_FALSE(idist::all_reduce(not_last, "MIN"));
  EXPECT_FALSE(idist::all_reduce(not_last, "PRODUCT"));
  EXPECT_EQ(idist::all_reduce(not_last, "OR"), ws > 1);
  EXPECT_EQ(idist::all_reduce(not_last, "SUM"), ws > 1);
  EXPECT_EQ(idist::all_reduce(not_last, "MAX"), ws > 1);
  // Uniform inputs.
  for (ReduceOp op : kAllOps) {
    EXPECT_TRUE(idist::all_reduce(true, op)) << idist::to_string(op);
    EXPECT_FALSE(idist::all_reduce(false, op)) << idist::to_string(op);
  }
  static_assert(std::is_same_v<decltype(idist::all_reduce(true)), bool>);
}

TEST_F(AllReduceBool, SpanOfBools) {
  const int ws = world(), r = rank();
  const std::size_t n = 37;
  auto input = std::make_unique<bool[]>(n);  // element i is true on rank i % ws only
  for (std::size_t i = 0; i < n; ++i) input[i] = int(i % std::size_t(ws)) == r;
  SpanBuffer<bool> any(std::span<const bool>(input.get(), n));
  idist::all_reduce(any.span(), ReduceOp::Or);
  const std::vector<bool> any_out = any.to_host();
  EXPECT_EQ(mismatch(any_out, n, [](std::size_t) { return true; }), "");
  SpanBuffer<bool> all(std::span<const bool>(input.get(), n));
  idist::all_reduce(all.span(), "AND");
  const std::vector<bool> all_out = all.to_host();
  EXPECT_EQ(mismatch(all_out, n, [ws](std::size_t) { return ws == 1; }), "");
}

template <class T>
class AllReduceFloating : public Conformance {};
TYPED_TEST_SUITE(AllReduceFloating, FloatingElementTypes);

TYPED_TEST(AllReduceFloating, AndOrAreValueErrorsOnEveryRank) {
  using T = TypeParam;
  for (ReduceOp op : {ReduceOp::And, ReduceOp::Or}) {
    expect_value_error_on_every_rank([&] { idist::all_reduce(from_int<T>(1), op); }, idist::to_string(op));
    expect_value_error_on_every_rank([&] {
      std::vector<T> v(3, from_int<T>(1));
      idist::all_reduce(v, op);
    });
  }
  expect_value_error_on_every_rank([&] { idist::all_reduce(from_int<T>(1), "AND"); });
  expect_value_error_on_every_rank([&] { idist::all_reduce(from_int<T>(1), "OR"); });
  // Still in step afterwards.
  EXPECT_EQ(to_double(idist::all_reduce(from_int<T>(1))), double(std::min<std::int64_t>(world(), 256)));
}

TYPED_TEST(AllReduceFloating, FractionalValuesSumExactly) {
  using T = TypeParam;
  // Multiples of 1/4 whose partial sums stay exactly representable in every floating type.
  const T v = T(float(rank() % 4) * 0.25f + 0.5f);
  double want = 0;
  for (int q = 0; q < world(); ++q) want += double(q % 4) * 0.25 + 0.5;
  const double got = to_double(idist::all_reduce(v));
  if (want <= 64) {
    EXPECT_EQ(got, want);
  } else {
    EXPECT_NEAR(got, want, want * 0.01);
  }
}

TEST_F(AllReduceErrors, UnknownOpNameOnEveryRank) {
  expect_value_error_on_every_rank([] { idist::all_reduce(10, "ABC"); }, "Unsupported reduction operation");
  expect_value_error_on_every_rank([] { idist::all_reduce(1.5, "sum"); }, "Unsupported reduction operation");
  expect_value_error_on_every_rank([] {
    std::vector<int> v = {1, 2};
    idist::all_reduce(v, "MEAN");
  });
  EXPECT_EQ(idist::all_reduce(10), 10 * world());  // ignite: all_reduce(10) == 10 * ws
}

TEST_F(AllReduceVectors, InPlaceVectorOverloads) {
  const int r = rank(), ws = world();
  std::vector<double> d(16);
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = (2.0 * r + 1.0) * double(i + 1);
  idist::all_reduce(d);
  for (std::size_t i = 0; i < d.size(); ++i) EXPECT_EQ(d[i], double(ws) * ws * double(i + 1)) << i;

  std::vector<std::int64_t> big = {std::int64_t(r) << 40, -std::int64_t(r), 1};
  idist::all_reduce(big, "MAX");
  EXPECT_EQ(big, (std::vector<std::int64_t>{std::int64_t(ws - 1) << 40, 0, 1}));

  // ignite: a 4x4 tensor of 2r+1 under MAX.
  std::vector<float> m(16, 2.0f * float(r) + 1.0f);
  idist::all_reduce(m, ReduceOp::Max);
  EXPECT_EQ(m, std::vector<float>(16, 2.0f * float(ws - 1) + 1.0f));
}

TEST_F(AllReduceVectors, LargeBuffer) {
  const std::size_t n = std::size_t(1) << 18;
  std::vector<float> host(n);
  for (std::size_t i = 0; i < n; ++i) host[i] = float(rank() + 1) * float(i % 1000);
  SpanBuffer<float> buf(host);
  idist::all_reduce(buf.span());
  const std::vector<float> out = buf.to_host();
  const float factor = float(world() * (world() + 1) / 2);
  EXPECT_EQ(mismatch(out, n, [factor](std::size_t i) { return factor * float(i % 1000); }), "");
}

TEST_F(AllReduceAsync, IsCompletedThenWait) {
  const int r = rank(), ws = world();
  SpanBuffer<std::int32_t> buf(std::vector<std::int32_t>(64, 2 * r + 1));
  idist::Work w = idist::all_reduce_async(buf.span());
  if (idist::backend()) {
    EXPECT_EQ(w.op(), "all_reduce");  // names the operation in timeout messages
  }
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!w.is_completed() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  EXPECT_TRUE(w.is_completed());
  w.wait();
  EXPECT_TRUE(w.is_completed());
  EXPECT_EQ(buf.to_host(), std::vector<std::int32_t>(64, ws * ws));
  w.wait();  // waiting again is harmless
}

TEST_F(AllReduceAsync, SeveralInFlightWaitedOutOfOrder) {
  const int r = rank(), ws = world();
  SpanBuffer<double> a(std::vector<double>(1000, double(r)));
  SpanBuffer<std::int64_t> b(std::vector<std::int64_t>(10, std::int64_t(r)));
  SpanBuffer<float> c(std::vector<float>(100000, 1.0f));
  idist::Work wa = idist::all_reduce_async(a.span(), ReduceOp::Max);
  idist::Work wb = idist::all_reduce_async(b.span(), ReduceOp::Min);
  idist::Work wc = idist::all_reduce_async(c.span(), ReduceOp::Sum);
  wc.wait();
  wa.wait();
  wb.wait();
  EXPECT_EQ(a.to_host(), std::vector<double>(1000, double(ws - 1)));
  EXPECT_EQ(b.to_host(), std::vector<std::int64_t>(10, 0));
  EXPECT_EQ(c.to_host(), std::vector<float>(100000, float(ws)));
}

}  // namespace
}  // namespace idist::conformance
