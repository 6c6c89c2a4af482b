#pragma once
/// @file
/// Vocabulary types shared by every backend: reduction operations, element types, devices and the
/// untyped buffer views that the ComputationModel interface works on.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

namespace idist {

/// Reduction applied by all_reduce. Mirrors ignite's op strings "SUM" "PRODUCT" "MIN" "MAX" "AND" "OR"
/// (torch.distributed.ReduceOp SUM, PRODUCT, MIN, MAX, BAND, BOR).
/// And / Or are bitwise on integers and logical on bool; they are rejected for floating types.
/// On bool, Sum behaves as Or and Product as And (the result must stay a bool).
enum class ReduceOp { Sum, Product, Min, Max, And, Or };

/// Parses ignite's op name ("SUM", "PRODUCT", "MIN", "MAX", "AND", "OR"; exact, upper case).
/// @throws ValueError naming the string and listing the accepted names.
ReduceOp parse_reduce_op(std::string_view name);

/// ignite's name of `op` ("SUM", ...).
std::string_view to_string(ReduceOp op);

/// Element type of a buffer: the integer, floating and bool types of torch.distributed (torch.uint8,
/// int8, int16, int32, int64, float16, bfloat16, float32, float64, bool) and PyTorch 2.x's unsigned
/// torch.uint16, uint32 and uint64. Sizes: Bool, UInt8, Int8 = 1 byte; Int16, UInt16, Float16,
/// BFloat16 = 2; Int32, UInt32, Float32 = 4; Int64, UInt64, Float64 = 8. The unsigned widths above
/// 8 bits come last so that the other values keep their numbers.
enum class DType {
  Bool,
  UInt8,
  Int8,
  Int16,
  Int32,
  Int64,
  Float16,
  BFloat16,
  Float32,
  Float64,
  UInt16,
  UInt32,
  UInt64
};

/// Number of DType values (they are 0 .. kDTypeCount - 1), for tables indexed by DType.
inline constexpr std::size_t kDTypeCount = std::size_t(DType::UInt64) + 1;

/// Size of one element of `t`, in bytes.
std::size_t dtype_size(DType t) noexcept;

/// Lower-case name of `t` ("float32", "bfloat16", ...), as used in error messages.
std::string_view to_string(DType t) noexcept;

/// True for Float16, BFloat16, Float32 and Float64 (false for bool and the integers).
constexpr bool is_floating(DType t) noexcept {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}

/// IEEE 754 binary16 storage type (what torch calls at::Half). Converts to and from float.
struct Half {
  std::uint16_t bits = 0;  ///< the binary16 bit pattern
  Half() = default;
  /// Rounds `f` to the nearest binary16 value (ties to even).
  explicit Half(float f) noexcept;
  /// Exact widening to float.
  explicit operator float() const noexcept;
  /// Equal as numbers (so +0 == -0 and NaN != NaN, as in torch).
  friend bool operator==(Half a, Half b) noexcept { return float(a) == float(b); }
};

/// bfloat16 storage type (the upper 16 bits of a float32). Converts to and from float.
struct BFloat16 {
  std::uint16_t bits = 0;  ///< the upper 16 bits of the float32 pattern
  BFloat16() = default;
  /// Rounds `f` to the nearest bfloat16 value (ties to even; NaN stays NaN).
  explicit BFloat16(float f) noexcept;
  /// Exact widening to float.
  explicit operator float() const noexcept {
    std::uint32_t u = std::uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }
  /// Equal as numbers (so +0 == -0 and NaN != NaN, as in torch).
  friend bool operator==(BFloat16 a, BFloat16 b) noexcept { return float(a) == float(b); }
};

/// Maps a C++ element type to its DType. Specialised for every supported type; the LibTorch layer
/// adds at::Half and at::BFloat16.
template <class T>
struct dtype_traits;

/// @cond INTERNAL
namespace detail {
// The DType of a standard integer type, by its width and signedness, so that every spelling
// (int64_t, long long, size_t, unsigned, ...) maps to the element type of its representation.
template <class T>
constexpr DType integer_dtype() noexcept {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8);
  if constexpr (std::is_signed_v<T>)
    return sizeof(T) == 1 ? DType::Int8 : sizeof(T) == 2 ? DType::Int16 : sizeof(T) == 4 ? DType::Int32 : DType::Int64;
  else
    return sizeof(T) == 1   ? DType::UInt8
           : sizeof(T) == 2 ? DType::UInt16
           : sizeof(T) == 4 ? DType::UInt32
                            : DType::UInt64;
}
}  // namespace detail

#define IDIST_DTYPE_TRAIT(T, D)              \
  template <>                                \
  struct dtype_traits<T> {                   \
    static constexpr DType value = DType::D; \
  };
IDIST_DTYPE_TRAIT(bool, Bool)
IDIST_DTYPE_TRAIT(Half, Float16)
IDIST_DTYPE_TRAIT(BFloat16, BFloat16)
IDIST_DTYPE_TRAIT(float, Float32)
IDIST_DTYPE_TRAIT(double, Float64)
#undef IDIST_DTYPE_TRAIT
// Every standard signed and unsigned integer type (the fixed-width aliases and size_t are among them).
// Plain char, wchar_t and the charN_t types are characters, not elements.
#define IDIST_INTEGER_TRAIT(T)                                 \
  template <>                                                  \
  struct dtype_traits<T> {                                     \
    static constexpr DType value = detail::integer_dtype<T>(); \
  };
IDIST_INTEGER_TRAIT(signed char)
IDIST_INTEGER_TRAIT(unsigned char)
IDIST_INTEGER_TRAIT(short)
IDIST_INTEGER_TRAIT(unsigned short)
IDIST_INTEGER_TRAIT(int)
IDIST_INTEGER_TRAIT(unsigned int)
IDIST_INTEGER_TRAIT(long)
IDIST_INTEGER_TRAIT(unsigned long)
IDIST_INTEGER_TRAIT(long long)
IDIST_INTEGER_TRAIT(unsigned long long)
#undef IDIST_INTEGER_TRAIT
/// @endcond

/// An element type idist can communicate: one with a dtype_traits specialisation.
/// Plain `char` is deliberately not one, so that string literals select the string overloads.
template <class T>
concept Element = requires {
  dtype_traits<std::remove_cv_t<T>>::value;
};

/// The DType of element type T.
template <Element T>
inline constexpr DType dtype_of = dtype_traits<std::remove_cv_t<T>>::value;

/// Kind of memory a buffer lives in.
enum class DeviceType { CPU, CUDA };

/// @cond INTERNAL
namespace detail {
// A LibTorch device (c10::Device) or anything shaped like one: what idist::Device converts from.
// A concept rather than c10::Device itself, so that this header needs no LibTorch.
template <class D, class Self>
concept TorchDeviceLike = !std::is_same_v<std::remove_cvref_t<D>, Self> && requires(const D& d) {
  { d.is_cpu() } -> std::convertible_to<bool>;
  { d.is_cuda() } -> std::convertible_to<bool>;
  { d.has_index() } -> std::convertible_to<bool>;
  { d.index() } -> std::convertible_to<int>;
  { d.str() } -> std::convertible_to<std::string>;
};
// Throws ValueError for a device idist cannot use (mps, xla, ...), naming it.
[[noreturn]] void throw_unsupported_device(const std::string& name);
}  // namespace detail
/// @endcond

/// A device, as returned by idist::device() (mirrors torch.device). index is -1 for "cpu".
/// Converts both ways to torch::Device (c10::Device) where LibTorch is included: `torch::Device d =
/// idist::device();` and passing a torch::Device where an idist::Device is expected both compile.
struct Device {
  DeviceType type = DeviceType::CPU;  ///< CPU or CUDA
  int index = -1;                     ///< CUDA device ordinal; -1 for the CPU
  /// The CPU.
  constexpr Device() noexcept = default;
  /// A device of type `t` with ordinal `i` (-1: none, as for the CPU).
  constexpr Device(DeviceType t, int i) noexcept : type(t), index(i) {}
  /// A device of type `t` without ordinal.
  constexpr explicit Device(DeviceType t) noexcept : type(t) {}
  /// From a torch::Device (c10::Device): "cpu", or "cuda:N" ("cuda" without an ordinal is taken as
  /// cuda:0, as idist::to_idist_device does). A template, so that this header needs no LibTorch.
  /// @throws ValueError for other device types (mps, xla, ...), which no idist backend reads.
  template <detail::TorchDeviceLike<Device> D>
  Device(const D& d) {  // NOLINT(google-explicit-constructor): mirrors torch.device arguments
    if (d.is_cuda()) {
      type = DeviceType::CUDA;
      index = d.has_index() ? int(d.index()) : 0;
    } else if (!d.is_cpu()) {
      detail::throw_unsupported_device(std::string(d.str()));
    }
  }
  /// True for a CUDA device (torch.device.type == "cuda").
  constexpr bool is_cuda() const noexcept { return type == DeviceType::CUDA; }
  /// True for the CPU (torch.device.type == "cpu").
  constexpr bool is_cpu() const noexcept { return type == DeviceType::CPU; }
  /// "cpu" or "cuda:N".
  std::string str() const;
  /// Same type and index.
  friend bool operator==(const Device&, const Device&) = default;
  /// Compares with a torch::Device as idist::Device (an exact match, so that `idist::device() ==
  /// torch_device` is not ambiguous between the conversions both ways).
  template <detail::TorchDeviceLike<Device> D>
  friend bool operator==(const Device& a, const D& b) {
    return a == Device(b);
  }
  /// Converts to torch::Device (c10::Device), so that `torch::Device d = idist::device();` and
  /// `model->to(idist::device())` compile. A template, so that this header needs no LibTorch: it
  /// accepts any device type constructible from "cpu" / "cuda:N" that has is_cuda() and index().
  template <class D>
  requires(std::is_constructible_v<D, const std::string&>&& requires(const D& d) {
    d.is_cuda();
    d.index();
  })
  operator D() const {  // NOLINT(google-explicit-constructor): mirrors ignite's torch.device
    return D(str());
  }
};

/// A mutable, contiguous, typed view of `count` elements at `data` on `device`.
struct Buffer {
  void* data = nullptr;        ///< first element (host or device memory, as `device` says)
  std::size_t count = 0;       ///< number of elements, not bytes
  DType dtype = DType::UInt8;  ///< element type
  Device device{};             ///< where `data` lives
  /// Size in bytes (count * dtype_size(dtype)).
  std::size_t bytes() const noexcept { return count * dtype_size(dtype); }
};

/// A read-only, contiguous, typed view of `count` elements at `data` on `device`.
struct ConstBuffer {
  const void* data = nullptr;  ///< first element (host or device memory, as `device` says)
  std::size_t count = 0;       ///< number of elements, not bytes
  DType dtype = DType::UInt8;  ///< element type
  Device device{};             ///< where `data` lives
  ConstBuffer() = default;
  /// `n` elements of type `t` at `d` on `dev`.
  ConstBuffer(const void* d, std::size_t n, DType t, Device dev = {}) : data(d), count(n), dtype(t), device(dev) {}
  /// A mutable buffer is readable.
  ConstBuffer(const Buffer& b) : data(b.data), count(b.count), dtype(b.dtype), device(b.device) {}  // NOLINT
  /// Size in bytes (count * dtype_size(dtype)).
  std::size_t bytes() const noexcept { return count * dtype_size(dtype); }
};

/// Where a rank sits in the world: what every backend discovers at initialize() and the model
/// holds for ignite's get_rank(), get_local_rank(), get_world_size(), get_nproc_per_node(),
/// get_node_rank() and get_nnodes().
struct WorldLayout {
  int rank = 0;            ///< rank in the world, in [0, world_size)
  int local_rank = 0;      ///< rank among the processes of this node
  int world_size = 1;      ///< number of processes
  int nproc_per_node = 1;  ///< processes on each node
  int node_rank = 0;       ///< index of this node, in [0, nnodes)
  int nnodes = 1;          ///< number of nodes
};

}  // namespace idist
