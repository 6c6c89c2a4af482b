#pragma once
/// @file
/// Bridges between LibTorch and idist's vocabulary types: ScalarType <-> DType, c10::Device <->
/// idist::Device, dtype_traits for c10::Half / c10::BFloat16, and the Buffer view of a tensor.

#include <string>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "idist/detail/format.hpp"
#include "idist/error.hpp"
#include "idist/types.hpp"

namespace idist {

/// @cond INTERNAL
template <>
struct dtype_traits<c10::Half> {
  static constexpr DType value = DType::Float16;
};
template <>
struct dtype_traits<c10::BFloat16> {
  static constexpr DType value = DType::BFloat16;
};
/// @endcond

/// The idist element type of a tensor's scalar type: Bool, Byte (uint8), Char (int8), Short, Int,
/// Long, Half, BFloat16, Float and Double.
/// @throws ValueError naming the scalar type (complex, quantized, ...) and listing the supported ones.
inline DType to_dtype(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Bool: return DType::Bool;
    case c10::ScalarType::Byte: return DType::UInt8;
    case c10::ScalarType::Char: return DType::Int8;
    case c10::ScalarType::Short: return DType::Int16;
    case c10::ScalarType::Int: return DType::Int32;
    case c10::ScalarType::Long: return DType::Int64;
    case c10::ScalarType::Half: return DType::Float16;
    case c10::ScalarType::BFloat16: return DType::BFloat16;
    case c10::ScalarType::Float: return DType::Float32;
    case c10::ScalarType::Double: return DType::Float64;
    default:
      throw ValueError(
          detail::format_message("tensor dtype {} is not supported by idist collectives; expected one of "
                                 "Bool, Byte, Char, Short, Int, Long, Half, BFloat16, Float, Double",
                                 c10::toString(t)));
  }
}

/// The LibTorch scalar type of an idist element type (the inverse of to_dtype).
inline c10::ScalarType to_scalar_type(DType t) noexcept {
  switch (t) {
    case DType::Bool: return c10::ScalarType::Bool;
    case DType::UInt8: return c10::ScalarType::Byte;
    case DType::Int8: return c10::ScalarType::Char;
    case DType::Int16: return c10::ScalarType::Short;
    case DType::Int32: return c10::ScalarType::Int;
    case DType::Int64: return c10::ScalarType::Long;
    case DType::Float16: return c10::ScalarType::Half;
    case DType::BFloat16: return c10::ScalarType::BFloat16;
    case DType::Float32: return c10::ScalarType::Float;
    case DType::Float64: return c10::ScalarType::Double;
  }
  return c10::ScalarType::Undefined;
}

/// The idist::Device of a LibTorch device (cpu or cuda:N).
/// @throws ValueError for other device types (mps, xla, ...), which no idist backend reads.
inline Device to_idist_device(const c10::Device& d) {
  if (d.is_cpu()) return Device{};
  if (d.is_cuda()) return Device{DeviceType::CUDA, d.has_index() ? int(d.index()) : 0};
  throw ValueError(
      detail::format_message("tensor device {} is not supported by idist collectives; expected cpu or cuda", d.str()));
}

/// The LibTorch device of an idist::Device (the same as the implicit conversion).
inline c10::Device to_torch_device(const Device& d) {
  return d.type == DeviceType::CPU ? c10::Device(c10::kCPU) : c10::Device(c10::kCUDA, c10::DeviceIndex(d.index));
}

namespace detail {

/// A Buffer over the storage of a contiguous tensor (no copy).
inline Buffer tensor_buffer(const at::Tensor& t) {
  return Buffer{t.data_ptr(), std::size_t(t.numel()), to_dtype(t.scalar_type()), to_idist_device(t.device())};
}

}  // namespace detail

}  // namespace idist
