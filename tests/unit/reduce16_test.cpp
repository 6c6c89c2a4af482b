// backend_kit::reduce16 (the bulk float16 / bfloat16 reduction every host backend uses) against the scalar
// Half / BFloat16 conversions: bit for bit on every value class (normal, subnormal, ties, overflow,
// inf, NaN), every op, block boundaries and aliasing.
#include "backend_kit/reduce16.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "idist/error.hpp"

namespace {

using idist::BFloat16;
using idist::DType;
using idist::Half;
using idist::ReduceOp;

float widen(DType d, std::uint16_t bits) {
  if (d == DType::Float16) {
    Half h;
    h.bits = bits;
    return float(h);
  }
  BFloat16 b;
  b.bits = bits;
  return float(b);
}

std::uint16_t narrow(DType d, float f) { return d == DType::Float16 ? Half(f).bits : BFloat16(f).bits; }

float apply(ReduceOp op, float a, float b) {
  switch (op) {
    case ReduceOp::Sum: return a + b;
    case ReduceOp::Product: return a * b;
    case ReduceOp::Min: return (std::isnan(a) || a < b) ? a : b;
    default: return (std::isnan(a) || a > b) ? a : b;
  }
}

// Every 16-bit pattern appears on each side, paired with random partners (so sums hit ties,
// overflow to inf, subnormal results and NaN), plus a tail that is not a multiple of any block.
std::vector<std::uint16_t> patterns(std::mt19937& rng, std::size_t n) {
  std::vector<std::uint16_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = i < 65536 ? std::uint16_t(i) : std::uint16_t(rng());
  std::shuffle(v.begin() + 65536, v.end(), rng);
  return v;
}

class Reduce16 : public ::testing::TestWithParam<std::tuple<DType, ReduceOp>> {};

TEST_P(Reduce16, MatchesScalarConversionsBitForBit) {
  const auto [dtype, op] = GetParam();
  std::mt19937 rng(7);
  for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(7), std::size_t(511), std::size_t(512),
                        std::size_t(513), std::size_t(65536 + 1000 + 3)}) {
    std::vector<std::uint16_t> a(n), b(n);
    if (n > 65536) {
      a = patterns(rng, n);
      b = patterns(rng, n);
      std::shuffle(b.begin(), b.end(), rng);
    } else {
      for (auto& x : a) x = std::uint16_t(rng());
      for (auto& x : b) x = std::uint16_t(rng());
    }
    std::vector<std::uint16_t> out(n);
    idist::backend_kit::reduce16(dtype, op, out.data(), a.data(), b.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      const float expected = widen(dtype, narrow(dtype, apply(op, widen(dtype, a[i]), widen(dtype, b[i]))));
      const float got = widen(dtype, out[i]);
      if (std::isnan(expected)) {
        ASSERT_TRUE(std::isnan(got)) << "element " << i << " of " << n << ": " << a[i] << " op " << b[i];
      } else {
        ASSERT_EQ(out[i], narrow(dtype, expected))
            << "element " << i << " of " << n << ": " << a[i] << " op " << b[i] << " = " << expected;
      }
    }
  }
}

TEST_P(Reduce16, OutputMayAliasEitherInput) {
  const auto [dtype, op] = GetParam();
  std::mt19937 rng(11);
  const std::size_t n = 2000;
  std::vector<std::uint16_t> a(n), b(n), expected(n);
  for (std::size_t i = 0; i < n; ++i) {
    a[i] = narrow(dtype, std::uniform_real_distribution<float>(-4, 4)(rng));
    b[i] = narrow(dtype, std::uniform_real_distribution<float>(-4, 4)(rng));
  }
  idist::backend_kit::reduce16(dtype, op, expected.data(), a.data(), b.data(), n);
  auto in_a = a, in_b = b;
  idist::backend_kit::reduce16(dtype, op, in_a.data(), in_a.data(), b.data(), n);
  idist::backend_kit::reduce16(dtype, op, in_b.data(), a.data(), in_b.data(), n);
  EXPECT_EQ(in_a, expected);
  EXPECT_EQ(in_b, expected);
}

INSTANTIATE_TEST_SUITE_P(AllOps, Reduce16,
                         ::testing::Combine(::testing::Values(DType::Float16, DType::BFloat16),
                                            ::testing::Values(ReduceOp::Sum, ReduceOp::Product, ReduceOp::Min,
                                                              ReduceOp::Max)));

TEST(Reduce16Errors, RejectsOtherDtypesAndBitwiseOps) {
  std::uint16_t x = 0;
  EXPECT_THROW(idist::backend_kit::reduce16(DType::Float32, ReduceOp::Sum, &x, &x, &x, 1), idist::ValueError);
  EXPECT_THROW(idist::backend_kit::reduce16(DType::Float16, ReduceOp::And, &x, &x, &x, 1), idist::ValueError);
}

}  // namespace
