#include "nccl/host_reduce.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/reduce_check.hpp"

namespace idist::nccl_backend {

namespace {

// Integer arithmetic through the unsigned type so that overflow wraps instead of being undefined.
template <class T>
T wrap_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return T(U(a) + U(b));
}
template <class T>
T wrap_mul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  // Promote to at least unsigned int so that e.g. uint16 * uint16 does not overflow a signed int.
  using W = std::common_type_t<U, unsigned int>;
  return T(U(W(U(a)) * W(U(b))));
}

template <class T>
void reduce_integers(T* out, const T* rows, std::size_t count, int nranks, ReduceOp op) {
  for (std::size_t i = 0; i < count; ++i) {
    T acc = rows[i];
    for (int r = 1; r < nranks; ++r) {
      const T v = rows[std::size_t(r) * count + i];
      switch (op) {
        case ReduceOp::Sum: acc = wrap_add(acc, v); break;
        case ReduceOp::Product: acc = wrap_mul(acc, v); break;
        case ReduceOp::Min: acc = std::min(acc, v); break;
        case ReduceOp::Max: acc = std::max(acc, v); break;
        case ReduceOp::And: acc = T(acc & v); break;
        case ReduceOp::Or: acc = T(acc | v); break;
      }
    }
    out[i] = acc;
  }
}

void reduce_bools(std::uint8_t* out, const std::uint8_t* rows, std::size_t count, int nranks, ReduceOp op) {
  const bool any = op == ReduceOp::Sum || op == ReduceOp::Max || op == ReduceOp::Or;
  for (std::size_t i = 0; i < count; ++i) {
    bool acc = rows[i] != 0;
    for (int r = 1; r < nranks; ++r) {
      const bool v = rows[std::size_t(r) * count + i] != 0;
      acc = any ? (acc || v) : (acc && v);
    }
    out[i] = acc ? 1 : 0;
  }
}

template <class T, class Acc>
void reduce_floats(T* out, const T* rows, std::size_t count, int nranks, ReduceOp op) {
  for (std::size_t i = 0; i < count; ++i) {
    Acc acc = Acc(rows[i]);
    for (int r = 1; r < nranks; ++r) {
      const Acc v = Acc(rows[std::size_t(r) * count + i]);
      switch (op) {
        case ReduceOp::Sum: acc += v; break;
        case ReduceOp::Product: acc *= v; break;
        case ReduceOp::Min: acc = std::min(acc, v); break;
        case ReduceOp::Max: acc = std::max(acc, v); break;
        case ReduceOp::And:
        case ReduceOp::Or: break;  // rejected by check_reduce_op
      }
    }
    out[i] = T(acc);
  }
}

}  // namespace

void reduce_rows(void* out, const void* rows, std::size_t count, int nranks, DType dtype, ReduceOp op) {
  core::check_reduce_op(dtype, op);
  switch (dtype) {
    case DType::Bool:
      return reduce_bools(static_cast<std::uint8_t*>(out), static_cast<const std::uint8_t*>(rows), count, nranks, op);
    case DType::UInt8:
      return reduce_integers(static_cast<std::uint8_t*>(out), static_cast<const std::uint8_t*>(rows), count, nranks, op);
    case DType::Int8:
      return reduce_integers(static_cast<std::int8_t*>(out), static_cast<const std::int8_t*>(rows), count, nranks, op);
    case DType::Int16:
      return reduce_integers(static_cast<std::int16_t*>(out), static_cast<const std::int16_t*>(rows), count, nranks, op);
    case DType::Int32:
      return reduce_integers(static_cast<std::int32_t*>(out), static_cast<const std::int32_t*>(rows), count, nranks, op);
    case DType::Int64:
      return reduce_integers(static_cast<std::int64_t*>(out), static_cast<const std::int64_t*>(rows), count, nranks, op);
    case DType::Float16:
      return reduce_floats<Half, float>(static_cast<Half*>(out), static_cast<const Half*>(rows), count, nranks, op);
    case DType::BFloat16:
      return reduce_floats<BFloat16, float>(static_cast<BFloat16*>(out), static_cast<const BFloat16*>(rows), count,
                                            nranks, op);
    case DType::Float32:
      return reduce_floats<float, float>(static_cast<float*>(out), static_cast<const float*>(rows), count, nranks, op);
    case DType::Float64:
      return reduce_floats<double, double>(static_cast<double*>(out), static_cast<const double*>(rows), count, nranks, op);
  }
}

}  // namespace idist::nccl_backend
