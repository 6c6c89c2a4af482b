#pragma once
/// @file
/// Collectives of ignite.distributed.utils (all_reduce, all_gather, broadcast, barrier, new_group)
/// on C++ values: scalars, contiguous spans, strings and byte blobs. Tensor overloads live in
/// idist/torch/. Every call dispatches to current_model().
///
/// Common rules:
/// - `group` defaults to the whole world and also accepts a plain rank list; a rank outside the
///   group gets its input back unchanged (ignite's behaviour).
/// - Blocking calls wait at most the timeout given at initialize(); then TimeoutError.
/// - The in-place and async span overloads (all_reduce, broadcast, all_gather_async) take host
///   memory for serial, mpi and gloo, and device memory of idist::device() for nccl. Everything
///   else (scalars, strings, std::vector arguments and results) is host memory on every backend.
/// - Collectives of one group must be issued in the same order on every rank.

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idist/context.hpp"
#include "idist/detail/collectives.hpp"
#include "idist/detail/format.hpp"
#include "idist/error.hpp"
#include "idist/group.hpp"
#include "idist/op_type.hpp"
#include "idist/types.hpp"
#include "idist/work.hpp"

namespace idist {

// ---------------------------------------------------------------------------------------------
// all_reduce

/// Non-blocking in-place reduction of `data` over `group`. Mirrors torch.distributed.all_reduce
/// with async_op=True. `data` must stay valid until the Work completes.
/// @throws ValueError for an op the element type cannot take (And / Or on floating types).
template <Element T>
Work all_reduce_async(std::span<T> data, ReduceOp op = ReduceOp::Sum, const Group& group = {}) {
  ComputationModel& m = current_model();
  return m.all_reduce(detail::buffer_of(data, m.buffer_device()), op, group);
}

/// In-place reduction of the contiguous `data` (same length on every rank) with `op` over `group`.
/// Mirrors ignite.distributed.all_reduce on a tensor.
/// @throws ValueError for an unsupported op / type pair; TimeoutError after the timeout.
template <Element T>
void all_reduce(std::span<T> data, ReduceOp op = ReduceOp::Sum, const Group& group = {}) {
  ComputationModel& m = current_model();
  m.all_reduce(detail::buffer_of(data, m.buffer_device()), op, group, Completion::Blocking);
}

/// all_reduce with ignite's op name ("SUM", "PRODUCT", "MIN", "MAX", "AND", "OR").
/// @throws ValueError for an unknown name.
template <Element T>
void all_reduce(std::span<T> data, std::string_view op, const Group& group = {}) {
  all_reduce(data, parse_reduce_op(op), group);
}

/// In-place reduction of a vector (not std::vector<bool>, which is not contiguous).
template <Element T>
requires(!std::is_same_v<T, bool>) void all_reduce(std::vector<T>& data, ReduceOp op = ReduceOp::Sum,
                                                   const Group& group = {}) {
  current_model().all_reduce(detail::buffer_of(std::span<T>(data), Device{}), op, group, Completion::Blocking);
}

/// In-place reduction of a vector, with ignite's op name.
template <Element T>
requires(!std::is_same_v<T, bool>) void all_reduce(std::vector<T>& data, std::string_view op, const Group& group = {}) {
  all_reduce(data, parse_reduce_op(op), group);
}

/// Reduces one number over `group` and returns the result in the same C++ type (an int stays an
/// int). Mirrors ignite.distributed.all_reduce on a Python number. Serial: returns `value`.
template <Element T>
T all_reduce(T value, ReduceOp op = ReduceOp::Sum, const Group& group = {}) {
  current_model().all_reduce(Buffer{&value, 1, dtype_of<T>, Device{}}, op, group, Completion::Blocking);
  return value;
}

/// Scalar all_reduce with ignite's op name.
template <Element T>
T all_reduce(T value, std::string_view op, const Group& group = {}) {
  return all_reduce(value, parse_reduce_op(op), group);
}

// ---------------------------------------------------------------------------------------------
// all_gather

/// Gathers `data` from every rank of `group` and returns the concatenation in rank order. Ranks may
/// contribute different lengths (the lengths are exchanged first). Mirrors ignite's all_gather on
/// tensors whose first dimension differs. A rank outside `group` gets its own data back.
template <Element T>
std::vector<T> all_gather(std::span<const T> data, const Group& group = {}) {
  std::vector<std::size_t> counts;
  std::vector<std::byte> bytes =
      detail::all_gather_varying(ConstBuffer{data.data(), data.size(), dtype_of<T>, Device{}}, group, counts);
  if constexpr (std::is_same_v<std::remove_cv_t<T>, bool>) {  // std::vector<bool> has no data()
    const auto* p = reinterpret_cast<const bool*>(bytes.data());
    return std::vector<T>(p, p + bytes.size());
  } else {
    std::vector<T> out(bytes.size() / sizeof(T));
    if (!bytes.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }
}

/// all_gather of a vector (not std::vector<bool>).
template <Element T>
requires(!std::is_same_v<T, bool>) std::vector<T> all_gather(const std::vector<T>& data, const Group& group = {}) {
  return all_gather(std::span<const T>(data), group);
}

/// Gathers one number per rank of `group`, in rank order. Mirrors ignite's all_gather on a number.
template <Element T>
std::vector<T> all_gather(T value, const Group& group = {}) {
  ComputationModel& m = current_model();
  const ProcessGroup& pg = m.process_group(group);
  if (!pg.is_member()) return {value};
  const std::size_t n = std::size_t(pg.size());
  // A plain array, not the result vector: std::vector<bool> has no contiguous data().
  const std::unique_ptr<T[]> out(new T[n]);
  m.all_gather(ConstBuffer{&value, 1, dtype_of<T>, Device{}}, Buffer{out.get(), n, dtype_of<T>, Device{}}, group,
               Completion::Blocking);
  return std::vector<T>(out.get(), out.get() + n);
}

/// Non-blocking all_gather of equal-length spans: `out` holds in.size() * group size elements.
/// Spans follow the backend's memory rule (host, or device memory for nccl).
/// @throws ValueError when out.size() is not in.size() times the group size.
template <Element T>
Work all_gather_async(std::span<const T> in, std::span<T> out, const Group& group = {}) {
  return detail::gather_spans(in, out, group, Completion::Async);
}

/// Blocking all_gather of equal-length spans into `out` (in.size() * group size elements, rank
/// order); the counterpart of torch.distributed.all_gather_into_tensor. Spans follow the backend's
/// memory rule (host, or device memory for nccl). A rank outside `group` gets `in` copied to the
/// front of `out`.
/// @throws ValueError when out.size() is not in.size() times the group size; TimeoutError after
///         the timeout.
template <Element T>
void all_gather_into(std::span<const T> in, std::span<T> out, const Group& group = {}) {
  detail::gather_spans(in, out, group, Completion::Blocking);
}

/// Gathers a string of any length and any UTF-8 (or binary) content from every rank of `group`.
/// Mirrors ignite's all_gather on a str. A rank outside `group` gets {s}.
std::vector<std::string> all_gather(std::string_view s, const Group& group = {});

/// Gathers byte blobs of different sizes from every rank, for users' own serialization: the C++
/// counterpart of ignite's all_gather on arbitrary picklable objects.
std::vector<std::vector<std::byte>> all_gather_object(std::span<const std::byte> blob, const Group& group = {});

// ---------------------------------------------------------------------------------------------
// broadcast

/// Non-blocking in-place broadcast of `data` (same length on every rank) from world rank `src`.
/// @throws ValueError when src is outside [0, world size).
template <Element T>
Work broadcast_async(std::span<T> data, int src = 0, const Group& group = {}) {
  ComputationModel& m = current_model();
  return m.broadcast(detail::buffer_of(data, m.buffer_device()), src, group);
}

/// In-place broadcast of `data` (same length on every rank) from rank `src`.
/// Mirrors ignite.distributed.broadcast on a tensor.
/// @throws ValueError when src is outside [0, world size); TimeoutError after the timeout.
template <Element T>
void broadcast(std::span<T> data, int src = 0) {
  ComputationModel& m = current_model();
  m.broadcast(detail::buffer_of(data, m.buffer_device()), src, Group{}, Completion::Blocking);
}

/// In-place broadcast of a vector (same length on every rank; not std::vector<bool>).
template <Element T>
requires(!std::is_same_v<T, bool>) void broadcast(std::vector<T>& data, int src = 0) {
  current_model().broadcast(detail::buffer_of(std::span<T>(data), Device{}), src, Group{}, Completion::Blocking);
}

/// Returns rank `src`'s `value` on every rank, exactly (no rounding, same C++ type).
/// Mirrors ignite.distributed.broadcast on a number.
/// @throws ValueError when src is outside [0, world size).
template <Element T>
T broadcast(T value, int src = 0) {
  current_model().broadcast(Buffer{&value, 1, dtype_of<T>, Device{}}, src, Group{}, Completion::Blocking);
  return value;
}

/// Safe-mode broadcast (ignite's `safe_mode=True`): ranks other than `src` may pass std::nullopt.
/// In safe mode the source first broadcasts whether it has a value, so a source passing
/// std::nullopt makes every rank throw instead of leaving them waiting.
/// @throws ValueError when the source passes std::nullopt ("source data can not be std::nullopt"),
///         and on a non-source rank passing std::nullopt without safe_mode ("safe_mode should be
///         true ..."); ValueError when src is outside [0, world size).
template <Element T>
T broadcast(std::optional<T> value, int src, bool safe_mode) {
  ComputationModel& m = current_model();
  detail::check_src(m, src, to_string(OpType::Broadcast));
  const bool is_src = m.rank() == src;
  if (!safe_mode) {
    detail::check_broadcast_presence(value.has_value(), is_src, safe_mode);
    return broadcast(*value, src);
  }
  std::vector<std::byte> bytes;
  if (is_src && value) {
    bytes.resize(sizeof(T));
    std::memcpy(bytes.data(), &*value, sizeof(T));
  }
  detail::broadcast_bytes(bytes, !is_src || value.has_value(), src, to_string(OpType::Broadcast));
  if (bytes.size() != sizeof(T))
    throw BackendError(
        detail::format_message("{}: received {} bytes from rank {}, expected {} (ranks disagree on the element type)",
                               to_string(OpType::Broadcast), bytes.size(), src, sizeof(T)));
  T out{};
  std::memcpy(&out, bytes.data(), sizeof(T));
  return out;
}

/// Safe-mode broadcast where every rank passes a value, as ignite's `broadcast(x, src,
/// safe_mode=True)` allows: returns rank `src`'s value on every rank; the other ranks' values are
/// ignored. T is deduced, so `idist::broadcast(x, 0, true)` compiles on any element type.
/// @throws ValueError when src is outside [0, world size).
template <Element T>
T broadcast(T value, int src, bool safe_mode) {
  return broadcast(std::optional<T>(value), src, safe_mode);
}

/// Returns rank `src`'s string on every rank (any length; receivers' lengths may differ).
/// Mirrors ignite.distributed.broadcast on a str.
/// @throws ValueError when src is outside [0, world size).
std::string broadcast(std::string value, int src = 0);

/// broadcast of a string literal.
inline std::string broadcast(const char* value, int src = 0) { return broadcast(std::string(value), src); }

/// Safe-mode string broadcast: ranks other than `src` may pass std::nullopt.
/// @throws ValueError as for the numeric safe-mode broadcast.
std::string broadcast(std::optional<std::string> value, int src, bool safe_mode);

/// Safe-mode string broadcast where every rank passes a string (ignite's `broadcast(s, src,
/// safe_mode=True)`): returns rank `src`'s string; the other ranks' strings are ignored.
/// @throws ValueError when src is outside [0, world size).
std::string broadcast(std::string value, int src, bool safe_mode);

/// Safe-mode broadcast of a string literal (the other ranks' strings are ignored).
inline std::string broadcast(const char* value, int src, bool safe_mode) {
  return broadcast(std::string(value), src, safe_mode);
}

/// Returns rank `src`'s path on every rank, byte for byte (its native() string; any length).
/// Mirrors ignite.distributed.broadcast on a pathlib.Path.
/// @throws ValueError when src is outside [0, world size).
std::filesystem::path broadcast(const std::filesystem::path& value, int src = 0);

/// Safe-mode path broadcast: ranks other than `src` may pass std::nullopt.
/// @throws ValueError as for the numeric safe-mode broadcast.
std::filesystem::path broadcast(std::optional<std::filesystem::path> value, int src, bool safe_mode);

/// Safe-mode path broadcast where every rank passes a path: returns rank `src`'s path; the other
/// ranks' paths are ignored.
/// @throws ValueError when src is outside [0, world size).
std::filesystem::path broadcast(const std::filesystem::path& value, int src, bool safe_mode);

/// Returns rank `src`'s byte blob on every rank (any length; what other ranks pass is ignored, and
/// they may pass an empty span). The C++ counterpart of ignite's broadcast of an arbitrary picklable
/// object, beside all_gather_object: serialize on the source, deserialize the result everywhere.
/// Serial: a copy of `blob`.
/// @throws ValueError when src is outside [0, world size); TimeoutError after the timeout.
std::vector<std::byte> broadcast_object(std::span<const std::byte> blob, int src = 0);

// ---------------------------------------------------------------------------------------------
// barrier and groups

/// Blocks until every rank of `group` has called it. Mirrors ignite.distributed.barrier.
/// @throws TimeoutError when some rank does not arrive within the timeout.
void barrier(const Group& group = {});

/// Non-blocking barrier.
Work barrier_async(const Group& group = {});

/// Creates a process group of `ranks` (every rank of the world must call it, with the same list).
/// Mirrors ignite.distributed.new_group. Serial: an empty list is accepted and returned as given
/// (ignite's serial model returns the list; Group{} is the world of one rank, so collectives on it
/// return their input), which keeps `new_group(ranks 1 .. world size - 1)` valid at world size 1.
/// @throws ValueError for a duplicate, a rank outside [0, world size), or an empty list when a
///         backend is initialized.
Group new_group(std::vector<int> ranks);

}  // namespace idist
