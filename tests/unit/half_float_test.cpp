// Half (IEEE binary16) and BFloat16 conversions: exact values, ties to even, specials, overflow,
// and an exhaustive round trip of every 16-bit pattern.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "idist/types.hpp"

namespace {

using idist::BFloat16;
using idist::Half;

std::uint16_t half_bits(float f) { return Half(f).bits; }
std::uint16_t bf16_bits(float f) { return BFloat16(f).bits; }
Half half_from_bits(std::uint16_t b) {
  Half h;
  h.bits = b;
  return h;
}
BFloat16 bf16_from_bits(std::uint16_t b) {
  BFloat16 h;
  h.bits = b;
  return h;
}
float bits_to_float(std::uint32_t u) { return std::bit_cast<float>(u); }

TEST(Half, ExactValues) {
  EXPECT_EQ(half_bits(0.0f), 0x0000);
  EXPECT_EQ(half_bits(-0.0f), 0x8000);
  EXPECT_EQ(half_bits(1.0f), 0x3c00);
  EXPECT_EQ(half_bits(-1.0f), 0xbc00);
  EXPECT_EQ(half_bits(2.0f), 0x4000);
  EXPECT_EQ(half_bits(0.5f), 0x3800);
  EXPECT_EQ(half_bits(-2.5f), 0xc100);
  EXPECT_EQ(half_bits(0.333251953125f), 0x3555);           // the half nearest 1/3, exactly
  EXPECT_EQ(half_bits(65504.0f), 0x7bff);                  // largest finite half
  EXPECT_EQ(half_bits(1.0f / 16384.0f), 0x0400);           // smallest normal, 2^-14
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -24)), 0x0001);     // smallest subnormal
  EXPECT_EQ(half_bits(std::ldexp(1023.0f, -24)), 0x03ff);  // largest subnormal
  EXPECT_EQ(half_bits(-std::ldexp(5.0f, -24)), 0x8005);
  EXPECT_EQ(half_bits(2048.0f), 0x6800);
  EXPECT_EQ(half_bits(2049.0f), 0x6800);  // tie between 2048 and 2050: even mantissa
  EXPECT_EQ(half_bits(2051.0f), 0x6802);  // tie between 2050 and 2052: even is 2052

  EXPECT_EQ(float(half_from_bits(0x3c00)), 1.0f);
  EXPECT_EQ(float(half_from_bits(0x7bff)), 65504.0f);
  EXPECT_EQ(float(half_from_bits(0x0001)), std::ldexp(1.0f, -24));
  EXPECT_EQ(float(half_from_bits(0x03ff)), std::ldexp(1023.0f, -24));
  EXPECT_EQ(float(half_from_bits(0x3555)), 0.333251953125f);
  EXPECT_TRUE(std::signbit(float(half_from_bits(0x8000))));
  EXPECT_EQ(float(half_from_bits(0x8000)), 0.0f);
}

TEST(Half, RoundsToNearestTiesToEven) {
  const float ulp1 = std::ldexp(1.0f, -10);                               // spacing of halves in [1, 2)
  EXPECT_EQ(half_bits(1.0f + ulp1 / 2), 0x3c00);                          // tie, 1.0 is even
  EXPECT_EQ(half_bits(1.0f + 3 * ulp1 / 2), 0x3c02);                      // tie, 1 + 2 ulp is even
  EXPECT_EQ(half_bits(1.0f + ulp1 / 2 + std::ldexp(1.0f, -20)), 0x3c01);  // just above the tie
  EXPECT_EQ(half_bits(1.0f + ulp1 / 2 - std::ldexp(1.0f, -20)), 0x3c00);  // just below the tie
  EXPECT_EQ(half_bits(-(1.0f + 3 * ulp1 / 2)), 0xbc02);
  // Subnormal range: spacing 2^-24.
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -25)), 0x0000);  // tie between 0 and 2^-24 -> 0
  EXPECT_EQ(half_bits(std::ldexp(3.0f, -25)), 0x0002);  // tie between 1 and 2 ulp -> 2
  EXPECT_EQ(half_bits(std::ldexp(5.0f, -25)), 0x0002);  // tie between 2 and 3 ulp -> 2
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -25) * 1.0001f), 0x0001);
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(half_bits(-std::ldexp(1.0f, -26)), 0x8000);  // underflow keeps the sign
  // Rounding up out of the subnormal range into the smallest normal.
  EXPECT_EQ(half_bits(std::ldexp(1023.5f, -24)), 0x0400);
  // Rounding carries into the exponent.
  EXPECT_EQ(half_bits(2.0f - std::ldexp(1.0f, -12)), 0x4000);
}

TEST(Half, InfinityNanAndOverflow) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(half_bits(inf), 0x7c00);
  EXPECT_EQ(half_bits(-inf), 0xfc00);
  EXPECT_EQ(half_bits(65519.0f), 0x7bff);  // below the midpoint to 65536: stays finite
  EXPECT_EQ(half_bits(65520.0f), 0x7c00);  // the midpoint rounds to even = infinity
  EXPECT_EQ(half_bits(-65520.0f), 0xfc00);
  EXPECT_EQ(half_bits(1e6f), 0x7c00);
  EXPECT_EQ(half_bits(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(half_bits(-std::numeric_limits<float>::max()), 0xfc00);

  for (float nan : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                    bits_to_float(0x7f800001u), bits_to_float(0x7fc00000u), bits_to_float(0xffbfffffu)}) {
    const std::uint16_t b = half_bits(nan);
    EXPECT_EQ(b & 0x7c00, 0x7c00) << std::hex << b;
    EXPECT_NE(b & 0x03ff, 0) << "NaN became infinity: " << std::hex << b;
    EXPECT_TRUE(std::isnan(float(half_from_bits(b))));
  }
  EXPECT_EQ(float(half_from_bits(0x7c00)), inf);
  EXPECT_EQ(float(half_from_bits(0xfc00)), -inf);
  EXPECT_TRUE(std::isnan(float(half_from_bits(0x7e00))));
  EXPECT_TRUE(std::isnan(float(half_from_bits(0x7c01))));
  EXPECT_TRUE(std::isnan(float(half_from_bits(0xffff))));
  EXPECT_FALSE(half_from_bits(0x7e00) == half_from_bits(0x7e00));  // NaN compares unequal
  EXPECT_TRUE(half_from_bits(0x0000) == half_from_bits(0x8000));   // +0 == -0
}

TEST(Half, EveryBitPatternRoundTripsThroughFloat) {
  for (std::uint32_t b = 0; b <= 0xffff; ++b) {
    const Half h = half_from_bits(std::uint16_t(b));
    const float f = float(h);
    const bool nan = (b & 0x7c00) == 0x7c00 && (b & 0x3ff) != 0;
    ASSERT_EQ(std::isnan(f), nan) << std::hex << b;
    if (nan) continue;
    ASSERT_EQ(Half(f).bits, b) << "bits 0x" << std::hex << b << " -> " << f;
  }
}

// Widening is exact: compare with value = (-1)^s * m * 2^(e-25) computed in double.
TEST(Half, WideningMatchesTheBinary16Formula) {
  for (std::uint32_t b = 0; b <= 0xffff; ++b) {
    const std::uint32_t e = (b >> 10) & 0x1f, m = b & 0x3ff;
    if (e == 0x1f) continue;
    const double mag = e == 0 ? std::ldexp(double(m), -24) : std::ldexp(double(m | 0x400), int(e) - 25);
    const double expect = (b & 0x8000) ? -mag : mag;
    ASSERT_EQ(double(float(half_from_bits(std::uint16_t(b)))), expect) << std::hex << b;
  }
}

// Rounding of arbitrary floats: the result must be the nearest finite half, ties to the even one,
// checked against its two neighbours over a spread of float bit patterns.
TEST(Half, RoundingIsNearestAgainstNeighbours) {
  for (std::uint64_t u = 0; u < 0x47800000u; u += 997) {  // |f| < 65536
    const float f = std::bit_cast<float>(std::uint32_t(u));
    const std::uint16_t b = half_bits(f);
    const double v = float(half_from_bits(b));
    if (b == 0x7c00) {  // overflow only from the midpoint to the next (virtual) binade up
      ASSERT_GE(f, 65520.0f);
      continue;
    }
    const double err = std::abs(double(f) - v);
    const double up = b < 0x7bff ? double(float(half_from_bits(std::uint16_t(b + 1)))) : 65536.0;
    const double down = b > 0 ? double(float(half_from_bits(std::uint16_t(b - 1)))) : -v;
    ASSERT_LE(err, std::abs(double(f) - up)) << f;
    ASSERT_LE(err, std::abs(double(f) - down)) << f;
    const bool tie = err != 0 && (err == std::abs(double(f) - up) || err == std::abs(double(f) - down));
    if (tie) {
      ASSERT_EQ(b & 1, 0) << "tie not rounded to even at " << f;
    }
  }
}

TEST(BFloat16, ExactValues) {
  EXPECT_EQ(bf16_bits(0.0f), 0x0000);
  EXPECT_EQ(bf16_bits(-0.0f), 0x8000);
  EXPECT_EQ(bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(bf16_bits(-2.0f), 0xc000);
  EXPECT_EQ(bf16_bits(3.0f), 0x4040);
  EXPECT_EQ(bf16_bits(256.0f), 0x4380);
  EXPECT_EQ(bf16_bits(1.0f / 3.0f), 0x3eab);  // 0x3eaaaaab rounds up
  EXPECT_EQ(float(bf16_from_bits(0x3eab)), bits_to_float(0x3eab0000u));
  EXPECT_EQ(float(bf16_from_bits(0x4040)), 3.0f);
  EXPECT_EQ(float(bf16_from_bits(0x7f7f)), bits_to_float(0x7f7f0000u));  // largest finite
  // Subnormals are kept (bfloat16 has float32's exponent range).
  EXPECT_EQ(bf16_bits(bits_to_float(0x00010000u)), 0x0001);
  EXPECT_EQ(float(bf16_from_bits(0x0001)), bits_to_float(0x00010000u));
  EXPECT_EQ(bf16_bits(bits_to_float(0x80400000u)), 0x8040);
}

TEST(BFloat16, RoundsToNearestTiesToEven) {
  EXPECT_EQ(bf16_bits(bits_to_float(0x3f808000u)), 0x3f80);  // tie, 0x3f80 even
  EXPECT_EQ(bf16_bits(bits_to_float(0x3f818000u)), 0x3f82);  // tie, 0x3f82 even
  EXPECT_EQ(bf16_bits(bits_to_float(0x3f808001u)), 0x3f81);  // above the tie
  EXPECT_EQ(bf16_bits(bits_to_float(0x3f807fffu)), 0x3f80);  // below the tie
  EXPECT_EQ(bf16_bits(bits_to_float(0xbf818000u)), 0xbf82);
  EXPECT_EQ(bf16_bits(bits_to_float(0x3fffffffu)), 0x4000);  // carry into the exponent
  EXPECT_EQ(bf16_bits(bits_to_float(0x00008000u)), 0x0000);  // subnormal tie to even zero
  EXPECT_EQ(bf16_bits(bits_to_float(0x00018000u)), 0x0002);
  EXPECT_EQ(bf16_bits(257.0f), 0x4380);  // 257 is a tie between 256 and 258
  EXPECT_EQ(bf16_bits(259.0f), 0x4382);  // tie between 258 and 260 -> 260 (even)
}

TEST(BFloat16, InfinityNanAndOverflow) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(bf16_bits(inf), 0x7f80);
  EXPECT_EQ(bf16_bits(-inf), 0xff80);
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::max()), 0x7f80);  // above the last midpoint
  EXPECT_EQ(bf16_bits(-std::numeric_limits<float>::max()), 0xff80);
  EXPECT_EQ(bf16_bits(bits_to_float(0x7f7f7fffu)), 0x7f7f);  // below it: stays finite
  EXPECT_EQ(bf16_bits(bits_to_float(0x7f7f8000u)), 0x7f80);  // the midpoint: even = infinity
  // NaNs whose payload lies only in the low 16 bits must not turn into infinity.
  for (std::uint32_t u : {0x7f800001u, 0x7fc00000u, 0xff800001u, 0x7fffffffu, 0x7f80ffffu}) {
    const std::uint16_t b = bf16_bits(bits_to_float(u));
    EXPECT_EQ(b & 0x7f80, 0x7f80) << std::hex << u;
    EXPECT_NE(b & 0x007f, 0) << "NaN 0x" << std::hex << u << " became 0x" << b;
    EXPECT_EQ(b & 0x8000, (u >> 16) & 0x8000) << "NaN sign";
    EXPECT_TRUE(std::isnan(float(bf16_from_bits(b))));
  }
  EXPECT_EQ(float(bf16_from_bits(0x7f80)), inf);
  EXPECT_EQ(float(bf16_from_bits(0xff80)), -inf);
}

TEST(BFloat16, EveryBitPatternRoundTripsThroughFloat) {
  for (std::uint32_t b = 0; b <= 0xffff; ++b) {
    const float f = float(bf16_from_bits(std::uint16_t(b)));
    ASSERT_EQ(std::bit_cast<std::uint32_t>(f), b << 16);  // widening is the upper half, exactly
    if (std::isnan(f)) continue;
    ASSERT_EQ(BFloat16(f).bits, b) << std::hex << b;
  }
}

}  // namespace
