// Host reductions shared by the backends: the pairwise functions gloo hands its allreduce, and the
// reduction of all-gathered rows of nccl's fallback.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "backend_kit/host_reduce.hpp"
#include "idist/error.hpp"

namespace idist::backend_kit {
namespace {

// rows[r][i] laid out back to back, as ncclAllGather leaves them.
template <class T>
std::vector<T> flatten(const std::vector<std::vector<T>>& rows) {
  std::vector<T> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  return flat;
}

template <class T>
std::vector<T> reduce(const std::vector<std::vector<T>>& rows, ReduceOp op) {
  const std::vector<T> flat = flatten(rows);
  std::vector<T> out(rows.front().size());
  reduce_rows(out.data(), flat.data(), out.size(), int(rows.size()), dtype_of<T>, op);
  return out;
}

TEST(HostReduce, Int32ArithmeticPerElementAcrossRanks) {
  const std::vector<std::vector<std::int32_t>> rows = {{1, -4, 7}, {3, 5, -2}, {6, 2, 0}};
  EXPECT_EQ(reduce(rows, ReduceOp::Sum), (std::vector<std::int32_t>{1 + 3 + 6, -4 + 5 + 2, 7 - 2 + 0}));
  EXPECT_EQ(reduce(rows, ReduceOp::Product), (std::vector<std::int32_t>{1 * 3 * 6, -4 * 5 * 2, 0}));
  EXPECT_EQ(reduce(rows, ReduceOp::Min), (std::vector<std::int32_t>{1, -4, -2}));
  EXPECT_EQ(reduce(rows, ReduceOp::Max), (std::vector<std::int32_t>{6, 5, 7}));
}

TEST(HostReduce, BitwiseAndOrOnIntegersAreNotMinMax) {
  // 2 & 1 == 0 while min(2, 1) == 1: the reason NCCL's Min cannot stand in for And.
  const std::vector<std::vector<std::uint8_t>> rows = {{0b0110, 0b0010, 0xff}, {0b0011, 0b0001, 0x0f}};
  EXPECT_EQ(reduce(rows, ReduceOp::And), (std::vector<std::uint8_t>{0b0010, 0, 0x0f}));
  EXPECT_EQ(reduce(rows, ReduceOp::Or), (std::vector<std::uint8_t>{0b0111, 0b0011, 0xff}));
  const std::vector<std::vector<std::int64_t>> wide = {{-1, std::int64_t(1) << 40},
                                                       {0x0f0f, (std::int64_t(1) << 40) | 3}};
  EXPECT_EQ(reduce(wide, ReduceOp::And), (std::vector<std::int64_t>{0x0f0f, std::int64_t(1) << 40}));
  EXPECT_EQ(reduce(wide, ReduceOp::Or), (std::vector<std::int64_t>{-1, (std::int64_t(1) << 40) | 3}));
}

TEST(HostReduce, Int16AllOps) {
  const std::vector<std::vector<std::int16_t>> rows = {{300, -7}, {-100, 12}, {5, 3}};
  EXPECT_EQ(reduce(rows, ReduceOp::Sum), (std::vector<std::int16_t>{205, 8}));
  EXPECT_EQ(reduce(rows, ReduceOp::Product), (std::vector<std::int16_t>{std::int16_t(300 * -100 * 5), -7 * 12 * 3}));
  EXPECT_EQ(reduce(rows, ReduceOp::Min), (std::vector<std::int16_t>{-100, -7}));
  EXPECT_EQ(reduce(rows, ReduceOp::Max), (std::vector<std::int16_t>{300, 12}));
  EXPECT_EQ(reduce(rows, ReduceOp::And),
            (std::vector<std::int16_t>{std::int16_t(300 & -100 & 5), std::int16_t(-7 & 12 & 3)}));
  EXPECT_EQ(reduce(rows, ReduceOp::Or),
            (std::vector<std::int16_t>{std::int16_t(300 | -100 | 5), std::int16_t(-7 | 12 | 3)}));
}

TEST(HostReduce, IntegerOverflowWrapsAround) {
  const std::vector<std::vector<std::int8_t>> rows = {{100, -100}, {100, -100}};
  EXPECT_EQ(reduce(rows, ReduceOp::Sum), (std::vector<std::int8_t>{-56, 56}));  // 200 - 256, -200 + 256
  const std::vector<std::vector<std::int32_t>> big = {{std::numeric_limits<std::int32_t>::max()}, {1}};
  EXPECT_EQ(reduce(big, ReduceOp::Sum), (std::vector<std::int32_t>{std::numeric_limits<std::int32_t>::min()}));
}

TEST(HostReduce, UnsignedWidthsAreExactAndWrapAround) {
  using U64 = std::uint64_t;
  constexpr U64 top = std::numeric_limits<U64>::max();
  // Values above INT64_MAX: a signed reduction would order or add them wrongly.
  EXPECT_EQ(reduce<U64>({{top, 3, top - 1, 0xF0F0}, {2, top, 1ull << 63, 0x0FF0}}, ReduceOp::Sum),
            (std::vector<U64>{1, 2, (top - 1) + (1ull << 63), 0xF0F0 + 0x0FF0}));
  EXPECT_EQ(reduce<U64>({{top, 3, 1ull << 63}, {2, top, 1ull << 62}}, ReduceOp::Max),
            (std::vector<U64>{top, top, 1ull << 63}));
  EXPECT_EQ(reduce<U64>({{top, 3, 1ull << 63}, {2, top, 1ull << 62}}, ReduceOp::Min),
            (std::vector<U64>{2, 3, 1ull << 62}));
  EXPECT_EQ(reduce<U64>({{1ull << 32, top}, {1ull << 32, top}}, ReduceOp::Product), (std::vector<U64>{0, 1}));
  EXPECT_EQ(reduce<U64>({{0xF0F0}, {0x0FF0}}, ReduceOp::And), (std::vector<U64>{0x00F0}));
  EXPECT_EQ(reduce<U64>({{0xF0F0}, {0x0FF0}}, ReduceOp::Or), (std::vector<U64>{0xFFF0}));

  using U32 = std::uint32_t;
  EXPECT_EQ(reduce<U32>({{0xFFFFFFFFu, 0x80000000u}, {2u, 0x7FFFFFFFu}}, ReduceOp::Sum),
            (std::vector<U32>{1u, 0xFFFFFFFFu}));
  EXPECT_EQ(reduce<U32>({{0x80000000u}, {1u}}, ReduceOp::Max), (std::vector<U32>{0x80000000u}));
  EXPECT_EQ(reduce<U32>({{0x10000u}, {0x10000u}}, ReduceOp::Product), (std::vector<U32>{0u}));

  using U16 = std::uint16_t;
  // 65535 * 65535 overflows a signed int if uint16 were promoted naively; modulo 2^16 it is 1.
  EXPECT_EQ(reduce<U16>({{65535, 40000, 0x8000}, {65535, 30000, 1}}, ReduceOp::Product),
            (std::vector<U16>{1, U16(40000u * 30000u), 0x8000}));
  EXPECT_EQ(reduce<U16>({{65535, 40000}, {2, 30000}}, ReduceOp::Sum), (std::vector<U16>{1, U16(70000u)}));
  EXPECT_EQ(reduce<U16>({{0x8000, 5}, {1, 7}}, ReduceOp::Min), (std::vector<U16>{1, 5}));
  EXPECT_EQ(reduce<U16>({{0xF0F0}, {0x0FF0}}, ReduceOp::Or), (std::vector<U16>{0xFFF0}));
}

TEST(HostReduce, BoolIsLogical) {
  const std::vector<std::vector<std::uint8_t>> rows = {{1, 0, 1, 0}, {1, 0, 0, 1}};
  const std::vector<std::uint8_t> flat = flatten(rows);
  std::vector<std::uint8_t> out(4);
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Or}) {
    reduce_rows(out.data(), flat.data(), 4, 2, DType::Bool, op);
    EXPECT_EQ(out, (std::vector<std::uint8_t>{1, 0, 1, 1})) << to_string(op);
  }
  for (ReduceOp op : {ReduceOp::Product, ReduceOp::Min, ReduceOp::And}) {
    reduce_rows(out.data(), flat.data(), 4, 2, DType::Bool, op);
    EXPECT_EQ(out, (std::vector<std::uint8_t>{1, 0, 0, 0})) << to_string(op);
  }
}

TEST(HostReduce, HalfAndBFloat16ReducedPairwiseInRankOrder) {
  const std::vector<std::vector<Half>> h = {{Half(1.5f), Half(-2.0f)}, {Half(0.25f), Half(8.0f)}};
  const std::vector<Half> hs = reduce(h, ReduceOp::Sum);
  EXPECT_EQ(float(hs[0]), 1.75f);
  EXPECT_EQ(float(hs[1]), 6.0f);
  const std::vector<std::vector<BFloat16>> b = {{BFloat16(3.0f)}, {BFloat16(-0.5f)}, {BFloat16(2.0f)}};
  EXPECT_EQ(float(reduce(b, ReduceOp::Product)[0]), -3.0f);
  EXPECT_EQ(float(reduce(b, ReduceOp::Min)[0]), -0.5f);
}

TEST(HostReduce, OutputMayAliasTheFirstRow) {
  std::vector<double> flat = {1.0, 2.0, 10.0, 20.0};
  reduce_rows(flat.data(), flat.data(), 2, 2, DType::Float64, ReduceOp::Sum);
  EXPECT_EQ(flat[0], 11.0);
  EXPECT_EQ(flat[1], 22.0);
}

TEST(HostReduce, OneRankIsTheIdentity) {
  const std::vector<std::vector<std::int64_t>> rows = {{5, -9, 0}};
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Product, ReduceOp::And, ReduceOp::Or})
    EXPECT_EQ(reduce(rows, op), rows[0]) << to_string(op);
}

TEST(HostReduce, BitwiseOnFloatsIsAValueError) {
  const std::vector<float> rows = {1.0f, 2.0f};
  float out = 0;
  EXPECT_THROW(reduce_rows(&out, rows.data(), 1, 2, DType::Float32, ReduceOp::And), ValueError);
}

TEST(ReduceFunction, PairwiseInPlaceWithEitherOperandAliased) {
  // gloo calls fn(out, out, other, n) and fn(out, other, out, n).
  std::vector<std::int64_t> a = {1, -2, 3};
  const std::vector<std::int64_t> b = {10, 20, -30};
  reduce_function(DType::Int64, ReduceOp::Sum)(a.data(), a.data(), b.data(), a.size());
  EXPECT_EQ(a, (std::vector<std::int64_t>{11, 18, -27}));
  reduce_function(DType::Int64, ReduceOp::Max)(a.data(), b.data(), a.data(), a.size());
  EXPECT_EQ(a, (std::vector<std::int64_t>{11, 20, -27}));
}

TEST(ReduceFunction, BoolBytesAreNormalisedToZeroOrOne) {
  const std::vector<std::uint8_t> a = {2, 0, 7, 0};
  const std::vector<std::uint8_t> b = {0, 0, 9, 5};
  std::vector<std::uint8_t> out(4);
  reduce_function(DType::Bool, ReduceOp::Sum)(out.data(), a.data(), b.data(), 4);
  EXPECT_EQ(out, (std::vector<std::uint8_t>{1, 0, 1, 1}));
  reduce_function(DType::Bool, ReduceOp::Min)(out.data(), a.data(), b.data(), 4);
  EXPECT_EQ(out, (std::vector<std::uint8_t>{0, 0, 1, 0}));
}

TEST(ReduceFunction, SixteenBitFloatsRoundToNearestEven) {
  // 2048 + 1 is not a float16: the sum rounds to even (2048), not up (2050).
  const std::vector<Half> a = {Half(2048.0f), Half(-1.5f)};
  const std::vector<Half> b = {Half(1.0f), Half(0.25f)};
  std::vector<Half> out(2);
  reduce_function(DType::Float16, ReduceOp::Sum)(out.data(), a.data(), b.data(), 2);
  EXPECT_EQ(float(out[0]), 2048.0f);
  EXPECT_EQ(float(out[1]), -1.25f);
}

TEST(ReduceFunction, EveryDtypeAndOpHasAFunctionOrAValueError) {
  for (std::size_t i = 0; i < kDTypeCount; ++i)
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Min, ReduceOp::Max, ReduceOp::And, ReduceOp::Or}) {
      const DType t = DType(i);
      if (is_floating(t) && (op == ReduceOp::And || op == ReduceOp::Or))
        EXPECT_THROW(reduce_function(t, op), ValueError) << to_string(t) << " " << to_string(op);
      else
        EXPECT_NE(reduce_function(t, op), nullptr) << to_string(t) << " " << to_string(op);
    }
}

}  // namespace
}  // namespace idist::backend_kit
