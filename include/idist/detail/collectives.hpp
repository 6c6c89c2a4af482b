#pragma once
/// @file
/// The helpers behind idist/collectives.hpp's templates: buffers of spans, the variable-length gather
/// and the byte broadcast the string and object collectives are built on. Not part of the API.

#include <algorithm>
#include <cstddef>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "idist/context.hpp"
#include "idist/detail/format.hpp"
#include "idist/error.hpp"
#include "idist/group.hpp"
#include "idist/op_type.hpp"
#include "idist/types.hpp"
#include "idist/work.hpp"

namespace idist::detail {

template <Element T>
Buffer buffer_of(std::span<T> s, Device device) {
  return Buffer{const_cast<std::remove_cv_t<T>*>(s.data()), s.size(), dtype_of<T>, device};
}

/// Throws ValueError unless 0 <= src < world size, naming `fn` (the function the user called).
void check_src(const ComputationModel& model, int src, std::string_view fn);

/// Gathers `in` whose element count may differ between ranks. Returns the concatenation in rank
/// order and sets `counts` to each rank's element count. A rank outside `group` gets its own data.
std::vector<std::byte> all_gather_varying(ConstBuffer in, const Group& group, std::vector<std::size_t>& counts);

/// Broadcasts `bytes` from world rank `src`, resizing the receivers' vector to the source's length
/// (a length header, then the payload). A source passing `present` false makes every rank throw
/// ValueError naming `what` and the source rank.
void broadcast_bytes(std::vector<std::byte>& bytes, bool present, int src, std::string_view what);

/// Validates ignite's rules for a missing broadcast value on the local rank.
/// @throws ValueError when !present and (is_src or !safe_mode).
void check_broadcast_presence(bool present, bool is_src, bool safe_mode);

/// An equal-length all_gather of `in` into `out` on the backend's memory. A rank outside `group` gets
/// `in` copied to the front of `out` instead.
/// @throws ValueError (outside the group) when out is smaller than in; what the model's all_gather
///         throws.
template <Element T>
Work gather_spans(std::span<const T> in, std::span<T> out, const Group& group, Completion how) {
  ComputationModel& m = current_model();
  if (!m.process_group(group).is_member()) {
    if (out.size() < in.size())
      throw ValueError(format_message("{}: out has {} elements, fewer than in's {}", to_string(OpType::AllGather),
                                      out.size(), in.size()));
    std::copy(in.begin(), in.end(), out.begin());
    return Work{};
  }
  const Device dev = m.buffer_device();
  return m.all_gather(ConstBuffer{in.data(), in.size(), dtype_of<T>, dev}, buffer_of(out, dev), group, how);
}

}  // namespace idist::detail
