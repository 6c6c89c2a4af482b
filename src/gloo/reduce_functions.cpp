// Reduction functions for gloo::allreduce. Arithmetic ops on built-in types and float16 come from
// gloo/math.h; gloo has no bfloat16, no logical ops on bool and no bitwise ops, so those are here.
#include "gloo/reduce_functions.hpp"

#include <gloo/math.h>
#include <gloo/types.h>

#include <algorithm>
#include <cstdint>

#include "core/reduce_check.hpp"

namespace idist::gloo_backend {

namespace {

static_assert(sizeof(gloo::float16) == sizeof(Half), "idist::Half must have gloo::float16's layout");

// bfloat16: widen to float, apply, round back (ties to even), as torch does for CPU bfloat16.
template <class Op>
void bfloat16_reduce(void* out, const void* a, const void* b, std::size_t n) {
  auto* o = static_cast<BFloat16*>(out);
  const auto* x = static_cast<const BFloat16*>(a);
  const auto* y = static_cast<const BFloat16*>(b);
  for (std::size_t i = 0; i < n; ++i) o[i] = BFloat16(Op{}(float(x[i]), float(y[i])));
}

struct FSum { float operator()(float x, float y) const { return x + y; } };
struct FProd { float operator()(float x, float y) const { return x * y; } };
struct FMax { float operator()(float x, float y) const { return std::max(x, y); } };
struct FMin { float operator()(float x, float y) const { return std::min(x, y); } };

template <class T>
void bit_and(void* out, const void* a, const void* b, std::size_t n) {
  auto* o = static_cast<T*>(out);
  const auto* x = static_cast<const T*>(a);
  const auto* y = static_cast<const T*>(b);
  for (std::size_t i = 0; i < n; ++i) o[i] = T(x[i] & y[i]);
}

template <class T>
void bit_or(void* out, const void* a, const void* b, std::size_t n) {
  auto* o = static_cast<T*>(out);
  const auto* x = static_cast<const T*>(a);
  const auto* y = static_cast<const T*>(b);
  for (std::size_t i = 0; i < n; ++i) o[i] = T(x[i] | y[i]);
}

// bool is reduced on its bytes, normalised to 0 / 1 so that any non-zero byte counts as true.
void logical_and(void* out, const void* a, const void* b, std::size_t n) {
  auto* o = static_cast<std::uint8_t*>(out);
  const auto* x = static_cast<const std::uint8_t*>(a);
  const auto* y = static_cast<const std::uint8_t*>(b);
  for (std::size_t i = 0; i < n; ++i) o[i] = std::uint8_t(x[i] != 0 && y[i] != 0);
}

void logical_or(void* out, const void* a, const void* b, std::size_t n) {
  auto* o = static_cast<std::uint8_t*>(out);
  const auto* x = static_cast<const std::uint8_t*>(a);
  const auto* y = static_cast<const std::uint8_t*>(b);
  for (std::size_t i = 0; i < n; ++i) o[i] = std::uint8_t(x[i] != 0 || y[i] != 0);
}

template <class T>
ReduceFn arithmetic(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return &gloo::sum<T>;
    case ReduceOp::Product: return &gloo::product<T>;
    case ReduceOp::Max: return &gloo::max<T>;
    case ReduceOp::Min: return &gloo::min<T>;
    case ReduceOp::And: return &bit_and<T>;
    case ReduceOp::Or: return &bit_or<T>;
  }
  return nullptr;
}

// Floating types: And / Or were rejected by check_reduce_op before we get here.
template <class T>
ReduceFn floating(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return &gloo::sum<T>;
    case ReduceOp::Product: return &gloo::product<T>;
    case ReduceOp::Max: return &gloo::max<T>;
    case ReduceOp::Min: return &gloo::min<T>;
    default: return nullptr;
  }
}

ReduceFn bfloat16(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return &bfloat16_reduce<FSum>;
    case ReduceOp::Product: return &bfloat16_reduce<FProd>;
    case ReduceOp::Max: return &bfloat16_reduce<FMax>;
    case ReduceOp::Min: return &bfloat16_reduce<FMin>;
    default: return nullptr;
  }
}

ReduceFn boolean(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Max:
    case ReduceOp::Or: return &logical_or;
    case ReduceOp::Product:
    case ReduceOp::Min:
    case ReduceOp::And: return &logical_and;
  }
  return nullptr;
}

}  // namespace

ReduceFn reduce_function(DType dtype, ReduceOp op) {
  core::check_reduce_op(dtype, op);
  switch (dtype) {
    case DType::Bool: return boolean(op);
    case DType::UInt8: return arithmetic<std::uint8_t>(op);
    case DType::Int8: return arithmetic<std::int8_t>(op);
    case DType::Int16: return arithmetic<std::int16_t>(op);
    case DType::Int32: return arithmetic<std::int32_t>(op);
    case DType::Int64: return arithmetic<std::int64_t>(op);
    case DType::Float16: return floating<gloo::float16>(op);
    case DType::BFloat16: return bfloat16(op);
    case DType::Float32: return floating<float>(op);
    case DType::Float64: return floating<double>(op);
  }
  return nullptr;
}

}  // namespace idist::gloo_backend
