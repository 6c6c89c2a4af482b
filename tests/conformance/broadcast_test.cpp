// broadcast on every backend and world size (ignite's _test_distrib_broadcast and more): from
// every source rank, numbers (exactly), strings, spans, safe mode, and every bad input.
#include <bit>
#include <chrono>
#include <thread>

#include "conformance/conformance.hpp"

namespace idist::conformance {
namespace {

// Fixtures: every test reports, on every rank, the ranks where it failed.
class BroadcastExact : public Conformance {};
class BroadcastStrings : public Conformance {};
class BroadcastSpans : public Conformance {};
class BroadcastErrors : public Conformance {};

using namespace std::chrono_literals;

template <class T>
T source_value(int src) {
  if constexpr (std::is_same_v<T, bool>)
    return src % 2 == 0;
  else
    return from_int<T>(std::min<std::int64_t>(10 + 3 * src, exact_int_limit_i64<T>()));
}

template <class T>
class BroadcastTyped : public Conformance {};
TYPED_TEST_SUITE(BroadcastTyped, AllElementTypes);

TYPED_TEST(BroadcastTyped, NumberFromEverySource) {
  using T = TypeParam;
  static_assert(std::is_same_v<decltype(idist::broadcast(T{}, 0)), T>);
  for (int src = 0; src < world(); ++src) {
    T other;
    if constexpr (std::is_same_v<T, bool>)
      other = !source_value<T>(src);
    else
      other = from_int<T>(0);
    const T got = idist::broadcast(rank() == src ? source_value<T>(src) : other, src);
    EXPECT_EQ(to_double(got), to_double(source_value<T>(src))) << type_name<T>() << " from " << src;
  }
}

TYPED_TEST(BroadcastTyped, SafeModeFromEverySource) {
  using T = TypeParam;
  for (int src = 0; src < world(); ++src) {
    const std::optional<T> mine = rank() == src ? std::optional<T>(source_value<T>(src)) : std::nullopt;
    const T got = idist::broadcast(mine, src, true);
    EXPECT_EQ(to_double(got), to_double(source_value<T>(src))) << type_name<T>() << " from " << src;
    // Safe mode with a value everywhere behaves like the plain broadcast.
    const T again = idist::broadcast(std::optional<T>(rank() == src ? source_value<T>(src) : T{}), src, true);
    EXPECT_EQ(to_double(again), to_double(source_value<T>(src)));
  }
}

TYPED_TEST(BroadcastTyped, SpanFromEverySource) {
  using T = TypeParam;
  const std::size_t n = 100;
  for (int src = 0; src < world(); ++src) {
    auto values = std::make_unique<T[]>(n);
    for (std::size_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<T, bool>)
        values[i] = rank() == src ? (i + std::size_t(src)) % 3 == 0 : false;
      else
        values[i] = rank() == src ? from_int<T>(std::int64_t((i * 2 + std::size_t(src)) % 101)) : from_int<T>(0);
    }
    SpanBuffer<T> buf(std::span<const T>(values.get(), n));
    idist::broadcast(buf.span(), src);
    const auto want = [src](std::size_t i) {
      if constexpr (std::is_same_v<T, bool>)
        return (i + std::size_t(src)) % 3 == 0;
      else
        return from_int<T>(std::int64_t((i * 2 + std::size_t(src)) % 101));
    };
    EXPECT_EQ(mismatch(buf.to_host(), n, want), "") << type_name<T>() << " from " << src;
  }
}

TEST_F(BroadcastExact, NumbersKeepEveryBit) {
  for (int src = 0; src < world(); ++src) {
    const bool me = rank() == src;
    EXPECT_EQ(idist::broadcast(me ? 1.0 / 3.0 : 0.0, src), 1.0 / 3.0);
    EXPECT_EQ(idist::broadcast(me ? 1.0f / 3.0f : 0.0f, src), 1.0f / 3.0f);
    const std::int64_t big = (std::int64_t(1) << 62) + 12345 + src;  // not representable in a double
    EXPECT_EQ(idist::broadcast(me ? big : std::int64_t(0), src), big);
    EXPECT_EQ(idist::broadcast(me ? std::numeric_limits<std::int64_t>::min() : std::int64_t(1), src),
              std::numeric_limits<std::int64_t>::min());
    EXPECT_EQ(idist::broadcast(me ? (long long)(-7) : 0LL, src), -7LL);
    EXPECT_EQ(idist::broadcast(me ? std::uint8_t(255) : std::uint8_t(0), src), 255);
    EXPECT_EQ(idist::broadcast(me ? std::int8_t(-128) : std::int8_t(0), src), -128);
    EXPECT_EQ(idist::broadcast(me ? 10 : 0, src), 10);  // ignite: _test(10, 0, safe_mode=False)
    // Bit patterns: a NaN payload and a negative zero arrive unchanged.
    const double nan = std::bit_cast<double>(std::uint64_t(0x7ff8dead0000beefULL));
    EXPECT_EQ(std::bit_cast<std::uint64_t>(idist::broadcast(me ? nan : 1.0, src)), 0x7ff8dead0000beefULL);
    EXPECT_EQ(std::bit_cast<std::uint64_t>(idist::broadcast(me ? -0.0 : 1.0, src)), std::bit_cast<std::uint64_t>(-0.0));
    const idist::Half h(1.0f / 3.0f);
    EXPECT_EQ(idist::broadcast(me ? h : idist::Half(0.0f), src).bits, h.bits);
    const idist::BFloat16 b(-1.0f / 3.0f);
    EXPECT_EQ(idist::broadcast(me ? b : idist::BFloat16(0.0f), src).bits, b.bits);
    // Safe mode too.
    const std::optional<double> third = me ? std::optional<double>(1.0 / 3.0) : std::nullopt;
    EXPECT_EQ(idist::broadcast(third, src, true), 1.0 / 3.0);
    const std::optional<std::int64_t> big_opt = me ? std::optional<std::int64_t>(big) : std::nullopt;
    EXPECT_EQ(idist::broadcast(big_opt, src, true), big);
  }
}

TEST_F(BroadcastStrings, DifferentLengthsFromEverySource) {
  std::string long_s;
  for (int i = 0; i < 200; ++i) long_s += "tests/ignite/distributed/utils/test_horovod.py::test_idist_broadcast_hvd";
  for (int src = 0; src < world(); ++src) {
    const bool me = rank() == src;
    EXPECT_EQ(idist::broadcast(me ? std::string("test-abcdefg") : std::string(), src), "test-abcdefg");
    EXPECT_EQ(idist::broadcast(me ? "test-abcdefg" : "", src), "test-abcdefg");  // const char*
    EXPECT_EQ(idist::broadcast(me ? long_s : std::string(), src), long_s);
    // Receivers holding a longer string get the source's shorter one.
    EXPECT_EQ(idist::broadcast(me ? std::string("ab") : long_s, src), "ab");
    // An empty source string empties every rank's.
    EXPECT_EQ(idist::broadcast(me ? std::string() : std::string("not empty"), src), "");
    const std::string utf8 = "Привет 你好 🚀 " + std::string("\0x", 2) + std::to_string(src);
    EXPECT_EQ(idist::broadcast(me ? utf8 : std::string("?"), src), utf8);
  }
}

TEST_F(BroadcastStrings, SafeModeFromEverySource) {
  for (int src = 0; src < world(); ++src) {
    const bool me = rank() == src;
    EXPECT_EQ(idist::broadcast(me ? std::optional<std::string>("test-abcdefg") : std::nullopt, src, true),
              "test-abcdefg");
    EXPECT_EQ(idist::broadcast(me ? std::optional<std::string>("") : std::nullopt, src, true), "");
    const std::string big(300000, char('a' + src % 26));
    EXPECT_EQ(idist::broadcast(me ? std::optional<std::string>(big) : std::nullopt, src, true), big);
    // Safe mode without any missing value.
    EXPECT_EQ(idist::broadcast(std::optional<std::string>(me ? "src" : "other"), src, true), "src");
  }
}

TEST_F(BroadcastSpans, IgnitesTensorsFromEverySource) {
  for (int src = 0; src < world(); ++src) {
    const bool me = rank() == src;
    // torch.tensor([1.2345, 2.3456], dtype=float) vs torch.empty_like
    std::vector<float> t = me ? std::vector<float>{1.2345f, 2.3456f} : std::vector<float>(2, 0.0f);
    idist::broadcast(t, src);
    EXPECT_EQ(t, (std::vector<float>{1.2345f, 2.3456f}));
    // torch.arange(100).reshape(4, 25) * 2
    std::vector<std::int64_t> a(100, -1);
    if (me)
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::int64_t(i) * 2;
    SpanBuffer<std::int64_t> buf(a);
    idist::broadcast(buf.span(), src);
    EXPECT_EQ(mismatch(buf.to_host(), 100, [](std::size_t i) { return std::int64_t(i) * 2; }), "") << "from " << src;
  }
}

TEST_F(BroadcastSpans, AsyncAndLarge) {
  const std::size_t n = std::size_t(1) << 18;
  const int src = world() - 1;
  std::vector<double> values(n, -1.0);
  if (rank() == src)
    for (std::size_t i = 0; i < n; ++i) values[i] = double(i) / 7.0;
  SpanBuffer<double> buf(values);
  idist::Work w = idist::broadcast_async(buf.span(), src);
  if (idist::backend()) {
    EXPECT_EQ(w.op(), "broadcast");  // names the operation in timeout messages
  }
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!w.is_completed() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  w.wait();
  EXPECT_EQ(mismatch(buf.to_host(), n, [](std::size_t i) { return double(i) / 7.0; }), "");
}

TEST_F(BroadcastErrors, SourceOutOfRangeOnEveryRank) {
  const int ws = world();
  for (int src : {ws, ws + 3, -1}) {
    const std::string needle = std::to_string(src);
    expect_value_error_on_every_rank([&] { idist::broadcast(1.5, src); }, needle);
    expect_value_error_on_every_rank([&] { idist::broadcast(std::string("abc"), src); }, needle);
    expect_value_error_on_every_rank([&] { idist::broadcast("abc", src); }, needle);
    expect_value_error_on_every_rank(
        [&] {
          std::vector<int> v = {1, 2};
          idist::broadcast(v, src);
        },
        needle);
    expect_value_error_on_every_rank(
        [&] {
          SpanBuffer<float> buf(std::vector<float>(3, 0.0f));
          idist::broadcast_async(buf.span(), src).wait();
        },
        needle);
    expect_value_error_on_every_rank([&] { idist::broadcast(std::optional<int>(1), src, true); }, needle);
    expect_value_error_on_every_rank([&] { idist::broadcast(std::optional<std::string>("x"), src, true); }, needle);
  }
}

// Safe mode: the source passing std::nullopt makes every rank throw, since the source announces
// it has no value before any payload is sent.
TEST_F(BroadcastErrors, NulloptOnTheSourceInSafeModeOnEveryRank) {
  for (int src = 0; src < world(); ++src) {
    const bool me = rank() == src;
    expect_value_error_on_every_rank(
        [&] { idist::broadcast(me ? std::optional<int>() : std::optional<int>(5), src, true); }, "can not be");
    expect_value_error_on_every_rank([&] { idist::broadcast(me ? std::optional<double>() : std::nullopt, src, true); },
                                     "can not be");
    expect_value_error_on_every_rank(
        [&] { idist::broadcast(me ? std::optional<std::string>() : std::optional<std::string>("x"), src, true); },
        "can not be");
  }
  EXPECT_EQ(idist::broadcast(7, 0), 7);  // the ranks are still in step
}

// Without safe mode std::nullopt is rejected locally, before any communication: every rank passes
// std::nullopt here, so no rank is left waiting for a source that threw.
TEST_F(BroadcastErrors, NulloptWithoutSafeModeIsALocalError) {
  for (int src = 0; src < world(); ++src) {
    const char* needle = rank() == src ? "can not be" : "safe_mode";  // ignite's two messages
    expect_value_error_on_every_rank([&] { idist::broadcast(std::optional<int>(), src, false); }, needle);
    expect_value_error_on_every_rank([&] { idist::broadcast(std::optional<idist::Half>(), src, false); }, needle);
    expect_value_error_on_every_rank([&] { idist::broadcast(std::optional<std::string>(), src, false); }, needle);
  }
  EXPECT_EQ(idist::broadcast(std::string("still in step"), world() - 1), "still in step");
}

}  // namespace
}  // namespace idist::conformance
