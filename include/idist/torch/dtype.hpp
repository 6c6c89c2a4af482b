#pragma once
/// @file
/// Bridges between LibTorch and idist's vocabulary types: ScalarType <-> DType, c10::Device <->
/// idist::Device, dtype_traits for c10::Half / c10::BFloat16, and the Buffer view of a tensor.

#include <optional>
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

/// @cond INTERNAL
namespace detail {
// LibTorch 2.3 and later have the unsigned scalar types UInt16, UInt32 and UInt64; 1.13 has none.
// A template on the enum, so that the names are looked up only where they exist.
template <class S = c10::ScalarType>
inline constexpr bool has_wide_unsigned = requires {
  S::UInt16;
  S::UInt32;
  S::UInt64;
};

template <class S = c10::ScalarType>
constexpr std::optional<DType> wide_unsigned_dtype(S t) noexcept {
  if constexpr (has_wide_unsigned<S>) {
    if (t == S::UInt16) return DType::UInt16;
    if (t == S::UInt32) return DType::UInt32;
    if (t == S::UInt64) return DType::UInt64;
  }
  return std::nullopt;
}

template <class S = c10::ScalarType>
constexpr S wide_unsigned_scalar_type(DType t) noexcept {
  if constexpr (has_wide_unsigned<S>) {
    if (t == DType::UInt16) return S::UInt16;
    if (t == DType::UInt32) return S::UInt32;
    if (t == DType::UInt64) return S::UInt64;
  }
  return S::Undefined;
}
}  // namespace detail
/// @endcond

/// The idist element type of a tensor's scalar type: Bool, Byte (uint8), Char (int8), Short, Int,
/// Long, Half, BFloat16, Float and Double, and with LibTorch 2.3 or later UInt16, UInt32 and UInt64.
/// @throws ValueError naming the scalar type (complex, quantized, ...) and listing the supported ones.
inline DType to_dtype(c10::ScalarType t) {
  if (const std::optional<DType> wide = detail::wide_unsigned_dtype(t)) return *wide;
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
                                 "Bool, Byte, Char, Short, Int, Long, Half, BFloat16, Float, Double{}",
                                 c10::toString(t), detail::has_wide_unsigned<> ? ", UInt16, UInt32, UInt64" : ""));
  }
}

/// The LibTorch scalar type of an idist element type (the inverse of to_dtype); Undefined for
/// uint16, uint32 and uint64 with a LibTorch older than 2.3, which has no such tensors.
inline c10::ScalarType to_scalar_type(DType t) noexcept {
  switch (t) {
    case DType::UInt16:
    case DType::UInt32:
    case DType::UInt64: return detail::wide_unsigned_scalar_type(t);
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
