// Element-wise reductions on the host. Plain loops the compiler vectorises; integer arithmetic
// through the unsigned type so that overflow wraps instead of being undefined.
#include "backend_kit/host_reduce.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend_kit/reduce16.hpp"
#include "core/reduce_check.hpp"

namespace idist::backend_kit {

namespace {

template <class T>
struct Add {
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return T(U(a) + U(b));
    } else {
      return a + b;
    }
  }
};

template <class T>
struct Mul {
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      // Widened to at least unsigned int so that e.g. uint16 * uint16 does not overflow a signed int.
      using W = std::common_type_t<std::make_unsigned_t<T>, unsigned int>;
      return T(W(std::make_unsigned_t<T>(a)) * W(std::make_unsigned_t<T>(b)));
    } else {
      return a * b;
    }
  }
};

template <class T>
struct Min {
  T operator()(T a, T b) const { return std::min(a, b); }
};
template <class T>
struct Max {
  T operator()(T a, T b) const { return std::max(a, b); }
};
template <class T>
struct BitAnd {
  T operator()(T a, T b) const { return T(a & b); }
};
template <class T>
struct BitOr {
  T operator()(T a, T b) const { return T(a | b); }
};

template <class T, class F>
void apply(void* out, const void* a, const void* b, std::size_t n) {
  auto* o = static_cast<T*>(out);
  const auto* x = static_cast<const T*>(a);
  const auto* y = static_cast<const T*>(b);
  const F f;
  for (std::size_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
}

// bool is reduced on its bytes, normalised to 0 / 1 so that any non-zero byte counts as true.
struct LogicalAnd {
  std::uint8_t operator()(std::uint8_t a, std::uint8_t b) const { return std::uint8_t(a != 0 && b != 0); }
};
struct LogicalOr {
  std::uint8_t operator()(std::uint8_t a, std::uint8_t b) const { return std::uint8_t(a != 0 || b != 0); }
};

template <DType D, ReduceOp Op>
void sixteen(void* out, const void* a, const void* b, std::size_t n) {
  reduce16(D, Op, out, a, b, n);
}

template <class T>
ReduceFn numeric(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return &apply<T, Add<T>>;
    case ReduceOp::Product: return &apply<T, Mul<T>>;
    case ReduceOp::Min: return &apply<T, Min<T>>;
    case ReduceOp::Max: return &apply<T, Max<T>>;
    case ReduceOp::And:
      if constexpr (std::is_integral_v<T>) return &apply<T, BitAnd<T>>;
      break;  // floating: rejected by check_reduce_op
    case ReduceOp::Or:
      if constexpr (std::is_integral_v<T>) return &apply<T, BitOr<T>>;
      break;
  }
  return nullptr;
}

template <DType D>
ReduceFn sixteen_bit(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return &sixteen<D, ReduceOp::Sum>;
    case ReduceOp::Product: return &sixteen<D, ReduceOp::Product>;
    case ReduceOp::Min: return &sixteen<D, ReduceOp::Min>;
    case ReduceOp::Max: return &sixteen<D, ReduceOp::Max>;
    default: return nullptr;  // And / Or: rejected by check_reduce_op
  }
}

ReduceFn boolean(ReduceOp op) {
  const bool any = op == ReduceOp::Sum || op == ReduceOp::Max || op == ReduceOp::Or;
  return any ? &apply<std::uint8_t, LogicalOr> : &apply<std::uint8_t, LogicalAnd>;
}

}  // namespace

ReduceFn reduce_function(DType dtype, ReduceOp op) {
  core::check_reduce_op(dtype, op);
  switch (dtype) {
    case DType::Bool: return boolean(op);
    case DType::UInt8: return numeric<std::uint8_t>(op);
    case DType::Int8: return numeric<std::int8_t>(op);
    case DType::Int16: return numeric<std::int16_t>(op);
    case DType::Int32: return numeric<std::int32_t>(op);
    case DType::Int64: return numeric<std::int64_t>(op);
    case DType::UInt16: return numeric<std::uint16_t>(op);
    case DType::UInt32: return numeric<std::uint32_t>(op);
    case DType::UInt64: return numeric<std::uint64_t>(op);
    case DType::Float16: return sixteen_bit<DType::Float16>(op);
    case DType::BFloat16: return sixteen_bit<DType::BFloat16>(op);
    case DType::Float32: return numeric<float>(op);
    case DType::Float64: return numeric<double>(op);
  }
  return nullptr;
}

void reduce_rows(void* out, const void* rows, std::size_t count, int nranks, DType dtype, ReduceOp op) {
  const ReduceFn fn = reduce_function(dtype, op);
  const std::size_t row_bytes = count * dtype_size(dtype);
  const auto* base = static_cast<const std::byte*>(rows);
  if (nranks < 2) {
    if (out != rows) std::memmove(out, rows, row_bytes);
    // One bool row is still normalised to 0 / 1, as the pairwise function would.
    if (dtype == DType::Bool) fn(out, out, out, count);
    return;
  }
  fn(out, base, base + row_bytes, count);
  for (int r = 2; r < nranks; ++r) fn(out, out, base + std::size_t(r) * row_bytes, count);
}

}  // namespace idist::backend_kit
