#include "backend_kit/reduce16.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include "core/reduce_check.hpp"
#include "idist/error.hpp"

namespace idist::backend_kit {

namespace {

// Blocks small enough for two float copies to stay in L1; a fixed trip count lets the compiler
// vectorise the float loops.
constexpr std::size_t kBlock = 512;

using Widen = void (*)(const std::uint16_t* in, float* out, std::size_t n);
using Narrow = void (*)(const float* in, std::uint16_t* out, std::size_t n);

void widen_half(const std::uint16_t* in, float* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    Half h;
    h.bits = in[i];
    out[i] = float(h);
  }
}

void narrow_half(const float* in, std::uint16_t* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = Half(in[i]).bits;
}

__attribute__((target("avx,f16c"))) void widen_half_f16c(const std::uint16_t* in, float* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  for (; i < n; ++i) out[i] = _cvtsh_ss(in[i]);
}

__attribute__((target("avx,f16c"))) void narrow_half_f16c(const float* in, std::uint16_t* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) out[i] = _cvtss_sh(in[i], _MM_FROUND_TO_NEAREST_INT);
}

// bfloat16 is the upper half of a float32: widening is a shift, narrowing rounds to nearest even
// (NaN stays a quiet NaN), branch-free so that it vectorises. Same results as BFloat16(float).
void widen_bfloat16(const std::uint16_t* in, float* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t u = std::uint32_t(in[i]) << 16;
    std::memcpy(out + i, &u, sizeof u);
  }
}

void narrow_bfloat16(const float* in, std::uint16_t* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t x;
    std::memcpy(&x, in + i, sizeof x);
    const bool nan = (x & 0x7fffffffu) > 0x7f800000u;
    const std::uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    out[i] = std::uint16_t(nan ? ((x >> 16) | 0x40u) : rounded);
  }
}

template <ReduceOp Op>
void apply(float* x, const float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const float a = x[i], b = y[i];
    if constexpr (Op == ReduceOp::Sum)
      x[i] = a + b;
    else if constexpr (Op == ReduceOp::Product)
      x[i] = a * b;
    else if constexpr (Op == ReduceOp::Min)
      x[i] = (a != a || a < b) ? a : b;  // a NaN on either side wins
    else
      x[i] = (a != a || a > b) ? a : b;
  }
}

template <ReduceOp Op>
void reduce_blocks(Widen widen, Narrow narrow, std::uint16_t* out, const std::uint16_t* a, const std::uint16_t* b,
                   std::size_t n) {
  alignas(32) float fa[kBlock];
  alignas(32) float fb[kBlock];
  for (std::size_t at = 0; at < n; at += kBlock) {
    const std::size_t m = std::min(kBlock, n - at);
    widen(a + at, fa, m);
    widen(b + at, fb, m);
    apply<Op>(fa, fb, m);
    narrow(fa, out + at, m);
  }
}

bool have_f16c() {
  static const bool yes = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  return yes;
}

}  // namespace

void reduce16(DType dtype, ReduceOp op, void* out, const void* a, const void* b, std::size_t n) {
  Widen widen;
  Narrow narrow;
  if (dtype == DType::Float16) {
    widen = have_f16c() ? &widen_half_f16c : &widen_half;
    narrow = have_f16c() ? &narrow_half_f16c : &narrow_half;
  } else if (dtype == DType::BFloat16) {
    widen = &widen_bfloat16;
    narrow = &narrow_bfloat16;
  } else {
    throw ValueError(fmt::format("reduce16: expected float16 or bfloat16, got {}", to_string(dtype)));
  }
  core::check_reduce_op(dtype, op);
  auto* o = static_cast<std::uint16_t*>(out);
  const auto* x = static_cast<const std::uint16_t*>(a);
  const auto* y = static_cast<const std::uint16_t*>(b);
  switch (op) {
    case ReduceOp::Sum: return reduce_blocks<ReduceOp::Sum>(widen, narrow, o, x, y, n);
    case ReduceOp::Product: return reduce_blocks<ReduceOp::Product>(widen, narrow, o, x, y, n);
    case ReduceOp::Min: return reduce_blocks<ReduceOp::Min>(widen, narrow, o, x, y, n);
    case ReduceOp::Max: return reduce_blocks<ReduceOp::Max>(widen, narrow, o, x, y, n);
    case ReduceOp::And:
    case ReduceOp::Or: break;  // rejected by check_reduce_op above
  }
}

}  // namespace idist::backend_kit
