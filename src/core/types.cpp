// Reduction names, element sizes, half / bfloat16 conversions and device names.
#include <bit>
#include <string>

#include <fmt/format.h>

#include "idist/error.hpp"
#include "idist/types.hpp"

namespace idist {

ReduceOp parse_reduce_op(std::string_view name) {
  if (name == "SUM") return ReduceOp::Sum;
  if (name == "PRODUCT") return ReduceOp::Product;
  if (name == "MIN") return ReduceOp::Min;
  if (name == "MAX") return ReduceOp::Max;
  if (name == "AND") return ReduceOp::And;
  if (name == "OR") return ReduceOp::Or;
  throw ValueError(
      fmt::format("Unsupported reduction operation: '{}'; expected one of SUM, PRODUCT, MIN, MAX, AND, OR", name));
}

std::string_view to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "SUM";
    case ReduceOp::Product: return "PRODUCT";
    case ReduceOp::Min: return "MIN";
    case ReduceOp::Max: return "MAX";
    case ReduceOp::And: return "AND";
    case ReduceOp::Or: return "OR";
  }
  return "?";
}

std::size_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::Bool:
    case DType::UInt8:
    case DType::Int8: return 1;
    case DType::Int16:
    case DType::UInt16:
    case DType::Float16:
    case DType::BFloat16: return 2;
    case DType::Int32:
    case DType::UInt32:
    case DType::Float32: return 4;
    case DType::Int64:
    case DType::UInt64:
    case DType::Float64: return 8;
  }
  return 1;
}

std::string_view to_string(DType t) noexcept {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::UInt8: return "uint8";
    case DType::Int8: return "int8";
    case DType::Int16: return "int16";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::UInt16: return "uint16";
    case DType::UInt32: return "uint32";
    case DType::UInt64: return "uint64";
  }
  return "?";
}

// binary16 <-> binary32 by bit manipulation; round to nearest even, keeps inf / NaN / subnormals.
Half::Half(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN
    bits = std::uint16_t(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
    return;
  }
  if (abs >= 0x477ff000u) {  // rounds to >= 65520: overflow to inf
    bits = std::uint16_t(sign | 0x7c00u);
    return;
  }
  if (abs < 0x38800000u) {  // result is subnormal or zero: add 0.5 (as float) and take low bits
    const float shifted = std::bit_cast<float>(abs) + 0.5f;
    bits = std::uint16_t(sign | (std::bit_cast<std::uint32_t>(shifted) - 0x3f000000u));
    return;
  }
  const std::uint32_t odd = (abs >> 13) & 1u;
  const std::uint32_t rounded = abs + 0xc8000fffu + odd;  // rebias exponent (-112 << 23) and round
  bits = std::uint16_t(sign | (rounded >> 13));
}

Half::operator float() const noexcept {
  const std::uint32_t sign = std::uint32_t(bits & 0x8000u) << 16;
  const std::uint32_t exp = (bits >> 10) & 0x1fu;
  const std::uint32_t mant = bits & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {  // zero or subnormal: value = mant * 2^-24
    const float v = float(mant) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

BFloat16::BFloat16(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it quiet NaN
    bits = std::uint16_t((x >> 16) | 0x40u);
    return;
  }
  const std::uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  bits = std::uint16_t((x + rounding) >> 16);
}

namespace detail {
void throw_unsupported_device(const std::string& name) {
  throw ValueError(fmt::format("device {} is not supported by idist; expected cpu or cuda", name));
}
}  // namespace detail

std::string Device::str() const {
  if (type == DeviceType::CPU) return "cpu";
  return index < 0 ? std::string("cuda") : fmt::format("cuda:{}", index);
}

}  // namespace idist
