// all_gather on every backend and world size (ignite's _test_distrib_all_gather and more): one
// number per rank, spans of different lengths, strings of any length and UTF-8 content, byte blobs.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <thread>

#include "conformance/conformance.hpp"

namespace idist::conformance {
namespace {

// Fixtures: every test reports, on every rank, the ranks where it failed.
class AllGatherSpans : public Conformance {};
class AllGatherStrings : public Conformance {};
class AllGatherObject : public Conformance {};

using namespace std::chrono_literals;

template <class T>
T value_of_rank(int r) {
  if constexpr (std::is_same_v<T, bool>)
    return r % 2 == 0;
  else
    return from_int<T>(std::min<std::int64_t>(2 * r + 1, exact_int_limit_i64<T>()));
}

template <class T>
class AllGatherTyped : public Conformance {};
TYPED_TEST_SUITE(AllGatherTyped, AllElementTypes);

TYPED_TEST(AllGatherTyped, OneNumberPerRankInRankOrder) {
  using T = TypeParam;
  const std::vector<T> got = idist::all_gather(value_of_rank<T>(rank()));
  static_assert(std::is_same_v<decltype(idist::all_gather(T{})), std::vector<T>>);
  EXPECT_EQ(mismatch(got, std::size_t(world()), [](std::size_t q) { return value_of_rank<T>(int(q)); }), "");
}

TYPED_TEST(AllGatherTyped, SameValueEverywhere) {
  using T = TypeParam;
  const T ten = std::is_same_v<T, bool> ? T(true) : from_int<T>(10);
  const std::vector<T> got = idist::all_gather(ten);  // ignite: all_gather(10) == [10] * ws
  EXPECT_EQ(mismatch(got, std::size_t(world()), [ten](std::size_t) { return ten; }), "");
}

// Rank r contributes r % 3 elements (rank 0 none), so some ranks are empty and lengths differ.
template <class T>
T element_of(int q, std::size_t i) {
  if constexpr (std::is_same_v<T, bool>)
    return (q + int(i)) % 2 == 0;
  else
    return from_int<T>(std::int64_t(q * 3 + int(i)) % std::int64_t(std::min(exact_int_limit<T>(), 100.0)));
}

TYPED_TEST(AllGatherTyped, DifferentLengthsPerRank) {
  using T = TypeParam;
  std::vector<T> expected;
  for (int q = 0; q < world(); ++q)
    for (std::size_t i = 0; i < std::size_t(q % 3); ++i) expected.push_back(element_of<T>(q, i));
  const std::size_t n = std::size_t(rank() % 3);
  const std::unique_ptr<T[]> mine(new T[std::max<std::size_t>(n, 1)]);
  for (std::size_t i = 0; i < n; ++i) mine[i] = element_of<T>(rank(), i);
  const std::vector<T> got = idist::all_gather(std::span<const T>(mine.get(), n));
  EXPECT_EQ(mismatch(got, expected.size(), [&](std::size_t i) { return T(expected[i]); }), "");
}

TEST_F(AllGatherSpans, IgnitesFourByTwentyFive) {
  // torch.arange(100).reshape(4, 25) * (rank + 1), gathered along the first dimension.
  std::vector<std::int64_t> mine(100);
  for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = std::int64_t(i) * (rank() + 1);
  const std::vector<std::int64_t> got = idist::all_gather(std::span<const std::int64_t>(mine));
  EXPECT_EQ(mismatch(got, 100u * std::size_t(world()),
                     [](std::size_t k) { return std::int64_t(k % 100) * std::int64_t(k / 100 + 1); }),
            "");
}

TEST_F(AllGatherSpans, EmptyEverywhereAndOnlyOnOneRank) {
  EXPECT_TRUE(idist::all_gather(std::vector<double>{}).empty());
  // Only the last rank contributes, and a large amount.
  const std::size_t n = 200000;
  std::vector<std::int32_t> mine;
  if (rank() == world() - 1) {
    mine.resize(n);
    std::iota(mine.begin(), mine.end(), 7);
  }
  const std::vector<std::int32_t> got = idist::all_gather(mine);
  EXPECT_EQ(mismatch(got, n, [](std::size_t i) { return std::int32_t(i) + 7; }), "");
}

TEST_F(AllGatherSpans, AsyncWithEqualLengths) {
  const std::vector<std::int16_t> in = {std::int16_t(rank()), std::int16_t(-rank()), 42};
  SpanBuffer<std::int16_t> src(in);
  SpanBuffer<std::int16_t> out(std::vector<std::int16_t>(3 * std::size_t(world()), -1));
  idist::Work w = idist::all_gather_async(std::span<const std::int16_t>(src.span()), out.span());
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!w.is_completed() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  w.wait();
  std::vector<std::int16_t> expected;
  for (int q = 0; q < world(); ++q) expected.insert(expected.end(), {std::int16_t(q), std::int16_t(-q), 42});
  EXPECT_EQ(out.to_host(), expected);
}

TEST_F(AllGatherSpans, AsyncOutputOfTheWrongSizeIsAValueErrorOnEveryRank) {
  SpanBuffer<float> in(std::vector<float>(4, 1.0f));
  SpanBuffer<float> small(std::vector<float>(4 * std::size_t(world()) - 1, 0.0f));
  SpanBuffer<float> large(std::vector<float>(4 * std::size_t(world()) + 4, 0.0f));
  expect_value_error_on_every_rank([&] { idist::all_gather_async(std::span<const float>(in.span()), small.span()); },
                                   "all_gather");
  expect_value_error_on_every_rank([&] { idist::all_gather_async(std::span<const float>(in.span()), large.span()); },
                                   "all_gather");
}

TEST_F(AllGatherStrings, AbcOnRankZeroTestTestElsewhere) {
  const std::string x = rank() == 0 ? "abc" : "test-test";
  std::vector<std::string> expected = {"abc"};
  expected.resize(std::size_t(world()), "test-test");
  EXPECT_EQ(idist::all_gather(x), expected);
  EXPECT_EQ(idist::all_gather(rank() == 0 ? "abc" : "test-test"), expected);  // const char*
  EXPECT_EQ(idist::all_gather(std::string_view(x)), expected);
}

TEST_F(AllGatherStrings, NinetyThousandCharacters) {
  std::string base;
  for (int i = 0; i < 2000; ++i) base += "tests/ignite/distributed/utils/test_native.py";
  ASSERT_EQ(base.size(), 90000u);
  const std::string x = rank() == 0 ? "abc" : base;
  std::vector<std::string> expected = {"abc"};
  expected.resize(std::size_t(world()), base);
  const std::vector<std::string> got = idist::all_gather(x);
  EXPECT_EQ(mismatch(got, expected.size(), [&](std::size_t q) { return expected[q]; }), "");
}

std::string non_ascii_of_rank(int q) {
  static const std::string samples[] = {
      "Привет, мир",                            // Cyrillic
      "你好，世界 — 分布式训练",                // CJK and an em dash
      "🚀🔥 emoji 👩‍💻",             // 4-byte sequences and a ZWJ sequence
      std::string("nul\0inside\0", 11),         // embedded NUL bytes
      "Ελληνικά · العربية · עברית",             // Greek, right-to-left scripts
      std::string("\xff\xfe binary \x80", 11),  // not UTF-8 at all: bytes pass through unchanged
  };
  return samples[std::size_t(q) % std::size(samples)] + "#" + std::to_string(q);
}

TEST_F(AllGatherStrings, NonAsciiAndEmbeddedNul) {
  std::vector<std::string> expected;
  for (int q = 0; q < world(); ++q) expected.push_back(non_ascii_of_rank(q));
  const std::vector<std::string> got = idist::all_gather(non_ascii_of_rank(rank()));
  EXPECT_EQ(got, expected);
  // Every sample on every rank, in one go.
  for (int k = 0; k < 6; ++k) {
    const std::vector<std::string> same = idist::all_gather(non_ascii_of_rank(k));
    EXPECT_EQ(same, std::vector<std::string>(std::size_t(world()), non_ascii_of_rank(k)));
  }
}

TEST_F(AllGatherStrings, EmptyStrings) {
  EXPECT_EQ(idist::all_gather(""), std::vector<std::string>(std::size_t(world()), ""));
  // Empty everywhere but the last rank.
  const std::string x = rank() == world() - 1 ? "last" : "";
  std::vector<std::string> expected(std::size_t(world()), "");
  expected.back() = "last";
  EXPECT_EQ(idist::all_gather(x), expected);
}

TEST_F(AllGatherObject, BlobsOfDifferentSizes) {
  const auto blob_of = [](int q) {
    std::vector<std::byte> b(std::size_t(q) * 37 + (q == 1 ? 100000 : 0));  // rank 0 empty, rank 1 large
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = std::byte((q * 31 + int(i)) & 0xff);
    return b;
  };
  const std::vector<std::vector<std::byte>> got = idist::all_gather_object(blob_of(rank()));
  EXPECT_EQ(mismatch(got, std::size_t(world()), [&](std::size_t q) { return blob_of(int(q)); }), "");
}

TEST_F(AllGatherObject, UsersOwnSerialization) {
  // A user-side "pickle": (rank, name) written as bytes, read back on every rank.
  struct Record {
    std::int32_t rank;
    char name[12];
  };
  Record mine{rank(), {}};
  std::snprintf(mine.name, sizeof mine.name, "worker-%d", rank());
  const auto* p = reinterpret_cast<const std::byte*>(&mine);
  const auto got = idist::all_gather_object(std::span<const std::byte>(p, sizeof mine));
  ASSERT_EQ(got.size(), std::size_t(world()));
  for (int q = 0; q < world(); ++q) {
    ASSERT_EQ(got[std::size_t(q)].size(), sizeof(Record));
    Record r;
    std::memcpy(&r, got[std::size_t(q)].data(), sizeof r);
    EXPECT_EQ(r.rank, q);
    EXPECT_EQ(std::string(r.name), "worker-" + std::to_string(q));
  }
}

class FrontDoor : public Conformance {};

// ComputationModel's front door checks arguments once for every backend, in the same words: the
// model itself (under the free functions) refuses a wrong all_gather output, a broadcast root
// outside the world and, on backends that read host memory, a device buffer.
TEST_F(FrontDoor, EveryBackendRefusesBadArgumentsInTheSameWords) {
  idist::ComputationModel& m = idist::current_model();
  const std::size_t w = std::size_t(world());
  std::vector<float> in(4, 1.0f), out(4 * w - 1, 0.0f), one(1, 0.0f);
  const std::string size_msg = "all_gather: out has " + std::to_string(4 * w - 1) +
                               " elements, expected in.count * group size = 4 * " + std::to_string(w) + " = " +
                               std::to_string(4 * w);
  const idist::Device host = m.buffer_device().type == idist::DeviceType::CUDA ? idist::Device{} : m.buffer_device();
  expect_value_error_on_every_rank(
      [&] {
        m.all_gather(idist::ConstBuffer{in.data(), 4, idist::DType::Float32, host},
                     idist::Buffer{out.data(), out.size(), idist::DType::Float32, host}, idist::Group{});
      },
      size_msg);
  expect_value_error_on_every_rank(
      [&] {
        m.broadcast(idist::Buffer{one.data(), 1, idist::DType::Float32, host}, world(), idist::Group{},
                    idist::Completion::Blocking);
      },
      "broadcast: src should be a rank in [0, " + std::to_string(w) + "), but given " + std::to_string(w));
  if (m.buffer_device().type == idist::DeviceType::CPU && m.backend()) {
    expect_value_error_on_every_rank(
        [&] {
          m.all_reduce(idist::Buffer{one.data(), 1, idist::DType::Float32, idist::Device{idist::DeviceType::CUDA, 0}},
                       idist::ReduceOp::Sum, idist::Group{});
        },
        "all_reduce: the " + *m.backend() + " backend communicates host memory, but data is on cuda:0");
  }
}

}  // namespace
}  // namespace idist::conformance
