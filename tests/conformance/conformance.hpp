#pragma once
// Shared helpers of the collective conformance suite. The suite runs unchanged on every backend
// and world size; these helpers keep every rank issuing the same collectives in the same order,
// even when a check fails, so that one failure does not desynchronise the ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "idist/idist.hpp"

namespace idist::conformance {

inline int rank() { return idist::get_rank(); }
inline int world() { return idist::get_world_size(); }

/// Base fixture of every conformance test. Only rank 0's report is printed in full, so after each
/// test every rank learns which ranks failed it and the others record a failure naming them: the
/// summary then lists every test that failed anywhere. (Each rank's own failure messages are
/// printed with a "[rank R]" prefix by the multi-rank main.)
class Conformance : public ::testing::Test {
 protected:
  void TearDown() override;
};

/// GTEST_SKIP for cases that need several ranks (the only reason a conformance case may skip).
#define IDIST_REQUIRE_WORLD_AT_LEAST(n)                                                                            \
  do {                                                                                                             \
    if (::idist::get_world_size() < (n))                                                                           \
      GTEST_SKIP() << "needs a world of at least " << (n) << " ranks; this one has " << ::idist::get_world_size(); \
  } while (0)

/// Runs `fn`, which must throw idist::ValueError on this rank (with `needle` in its message when
/// given), then gathers every rank's outcome so that each rank, rank 0 included, reports the
/// ranks where it did not. `fn` must either throw before communicating on every rank or take the
/// same collective steps on every rank before throwing.
template <class Fn>
void expect_value_error_on_every_rank(Fn&& fn, std::string_view needle = {}) {
  int ok = 0;
  std::string what;
  try {
    fn();
    what = "no exception was thrown";
  } catch (const idist::ValueError& e) {
    what = e.what();
    ok = needle.empty() || what.find(needle) != std::string::npos ? 1 : 0;
    if (!ok) what = "ValueError without \"" + std::string(needle) + "\": " + what;
  } catch (const std::exception& e) {
    what = std::string("not a ValueError: ") + e.what();
  }
  EXPECT_EQ(ok, 1) << "rank " << rank() << ": " << what;
  const std::vector<int> all = idist::all_gather(ok);
  for (std::size_t r = 0; r < all.size(); ++r)
    if (int(r) != rank()) {
      EXPECT_EQ(all[r], 1) << "rank " << r << " did not raise the expected ValueError";
    }
}

// ---------------------------------------------------------------------------------------------
// Element types

/// Every element type of the contract.
using AllElementTypes = ::testing::Types<bool, std::uint8_t, std::int8_t, std::int16_t, std::int32_t, std::int64_t,
                                         float, double, idist::Half, idist::BFloat16>;
/// The element types that take arithmetic reductions with numeric values (all but bool).
using NumericElementTypes = ::testing::Types<std::uint8_t, std::int8_t, std::int16_t, std::int32_t, std::int64_t, float,
                                             double, idist::Half, idist::BFloat16>;
/// Types holding negative numbers.
using SignedElementTypes = ::testing::Types<std::int8_t, std::int16_t, std::int32_t, std::int64_t, float, double,
                                            idist::Half, idist::BFloat16>;
/// Integer types (bitwise And / Or).
using IntegerElementTypes = ::testing::Types<std::uint8_t, std::int8_t, std::int16_t, std::int32_t, std::int64_t>;
/// Floating types (And / Or are rejected).
using FloatingElementTypes = ::testing::Types<float, double, idist::Half, idist::BFloat16>;

template <class T>
inline constexpr bool is_half_like = std::is_same_v<T, idist::Half> || std::is_same_v<T, idist::BFloat16>;

/// Largest integer N such that every integer in [0, N] is exactly representable in T.
template <class T>
double exact_int_limit() {
  if constexpr (std::is_same_v<T, bool>)
    return 1;
  else if constexpr (std::is_same_v<T, idist::Half>)
    return 2048;
  else if constexpr (std::is_same_v<T, idist::BFloat16>)
    return 256;
  else if constexpr (std::is_floating_point_v<T>)
    return std::ldexp(1.0, std::numeric_limits<T>::digits);
  else
    return double(std::numeric_limits<T>::max());
}

/// exact_int_limit<T>() as an int64, saturated: for int64 / uint64 the limit is 2^63 / 2^64, whose
/// conversion to int64 is undefined behaviour (at -O0 it gave INT64_MIN).
template <class T>
std::int64_t exact_int_limit_i64() {
  const double limit = exact_int_limit<T>();
  return limit >= 0x1p63 ? std::numeric_limits<std::int64_t>::max() : static_cast<std::int64_t>(limit);
}

/// True when negative integers are representable.
template <class T>
constexpr bool is_signed_element = !std::is_same_v<T, bool> && (is_half_like<T> || std::is_signed_v<T>);

/// The integer `v` as element type T (exact when |v| <= exact_int_limit<T>()).
template <class T>
T from_int(std::int64_t v) {
  if constexpr (is_half_like<T>)
    return T(float(v));
  else
    return static_cast<T>(v);
}

/// The value of `v` as a double (exact for every element type but large int64).
template <class T>
double to_double(T v) {
  if constexpr (is_half_like<T>)
    return double(float(v));
  else
    return double(v);
}

/// "" when `got` has `n` elements and got[i] == want(i) for each i; otherwise the size difference,
/// or how many elements differ and the first of them. Tests check it with EXPECT_EQ(..., "")
/// instead of ASSERTs in loops, so that a failing rank goes on issuing the test's collectives.
template <class Got, class Want>
std::string mismatch(const Got& got, std::size_t n, Want&& want) {
  if (got.size() != n) return "got " + std::to_string(got.size()) + " elements, expected " + std::to_string(n);
  using E = std::decay_t<decltype(want(std::size_t{0}))>;
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (!(E(got[i]) == want(i)) && bad++ == 0) first = i;
  if (bad == 0) return {};
  std::string s =
      std::to_string(bad) + " of " + std::to_string(n) + " elements differ; element " + std::to_string(first);
  if constexpr (std::is_arithmetic_v<E> || is_half_like<E>)
    s += " is " + std::to_string(to_double(E(got[first]))) + ", expected " + std::to_string(to_double(want(first)));
  return s;
}

/// Printable name of element type T.
template <class T>
std::string type_name() {
  return std::string(idist::to_string(idist::dtype_of<T>));
}

// ---------------------------------------------------------------------------------------------
// Files visible to the ranks of one host

/// A temporary directory created by rank 0, whose path is broadcast as a string, and created on
/// every other host too. Removed (by each host's local rank 0) after a barrier on destruction.
class SharedTempDir {
 public:
  SharedTempDir();
  ~SharedTempDir();
  SharedTempDir(const SharedTempDir&) = delete;
  SharedTempDir& operator=(const SharedTempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// Creates `file` with `content`, atomically (written under another name, then renamed).
void write_marker(const std::filesystem::path& file, const std::string& content = "done");

/// Every rank's hostname, in rank order (to know which ranks share a file system for /tmp).
std::vector<std::string> hostnames();

// ---------------------------------------------------------------------------------------------
// Memory of spans

/// Holds the elements of a span argument in the memory the current backend reads spans from:
/// host memory, or device memory of idist::device() for nccl (through the CUDA runtime, loaded
/// at run time so that the suite needs no CUDA to build).
template <idist::Element T>
class SpanBuffer {
 public:
  explicit SpanBuffer(std::span<const T> values);
  /// From a vector (not std::vector<bool>, which has no contiguous storage).
  template <class U = T>
  requires(!std::is_same_v<U, bool>) explicit SpanBuffer(const std::vector<T>& values)
      : SpanBuffer(std::span<const T>(values)) {}
  ~SpanBuffer();
  SpanBuffer(const SpanBuffer&) = delete;
  SpanBuffer& operator=(const SpanBuffer&) = delete;
  std::span<T> span() { return {data_, size_}; }
  /// The current contents, copied to the host.
  std::vector<T> to_host() const;

 private:
  std::unique_ptr<T[]> host_;
  T* data_ = nullptr;
  std::size_t size_ = 0;
  idist::Device device_{};
};

namespace detail {
void* device_alloc(idist::Device device, std::size_t bytes);
void device_free(idist::Device device, void* p);
void copy_to_device(idist::Device device, void* dst, const void* src, std::size_t bytes);
void copy_to_host(idist::Device device, void* dst, const void* src, std::size_t bytes);
}  // namespace detail

template <idist::Element T>
SpanBuffer<T>::SpanBuffer(std::span<const T> values)
    : size_(values.size()), device_(idist::current_model().buffer_device()) {
  if (device_.type == idist::DeviceType::CPU) {
    host_ = std::make_unique<T[]>(std::max<std::size_t>(1, size_));
    std::copy(values.begin(), values.end(), host_.get());
    data_ = host_.get();
    return;
  }
  data_ = static_cast<T*>(detail::device_alloc(device_, std::max<std::size_t>(1, size_) * sizeof(T)));
  detail::copy_to_device(device_, data_, values.data(), size_ * sizeof(T));
}

template <idist::Element T>
SpanBuffer<T>::~SpanBuffer() {
  if (device_.type != idist::DeviceType::CPU) detail::device_free(device_, data_);
}

template <idist::Element T>
std::vector<T> SpanBuffer<T>::to_host() const {
  if (device_.type == idist::DeviceType::CPU) return std::vector<T>(data_, data_ + size_);
  auto tmp = std::make_unique<T[]>(std::max<std::size_t>(1, size_));
  detail::copy_to_host(device_, tmp.get(), data_, size_ * sizeof(T));
  return std::vector<T>(tmp.get(), tmp.get() + size_);
}

}  // namespace idist::conformance
