// Reduction functions for gloo::allreduce. Arithmetic ops on built-in types come from gloo/math.h;
// float16 and bfloat16 from core/reduce16 (gloo's float16 converts element by element, several times
// slower); gloo has no logical ops on bool and no bitwise ops, so those are here.
#include "gloo/reduce_functions.hpp"

#include <gloo/math.h>
#include <gloo/types.h>

#include <algorithm>
#include <cstdint>

#include "core/reduce16.hpp"
#include "core/reduce_check.hpp"

namespace idist::gloo_backend {

namespace {

// float16 / bfloat16: widened, reduced and rounded back in blocks (see core/reduce16.hpp).
template <DType D, ReduceOp Op>
void reduce16(void* out, const void* a, const void* b, std::size_t n) {
  core::reduce16(D, Op, out, a, b, n);
}

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

template <DType D>
ReduceFn sixteen_bit(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return &reduce16<D, ReduceOp::Sum>;
    case ReduceOp::Product: return &reduce16<D, ReduceOp::Product>;
    case ReduceOp::Max: return &reduce16<D, ReduceOp::Max>;
    case ReduceOp::Min: return &reduce16<D, ReduceOp::Min>;
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
    case DType::Float16: return sixteen_bit<DType::Float16>(op);
    case DType::BFloat16: return sixteen_bit<DType::BFloat16>(op);
    case DType::Float32: return floating<float>(op);
    case DType::Float64: return floating<double>(op);
  }
  return nullptr;
}

}  // namespace idist::gloo_backend
