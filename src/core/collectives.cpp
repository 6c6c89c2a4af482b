// The non-template collectives: variable-length gathers, strings, byte blobs, barrier, groups.
#include "idist/collectives.hpp"

#include <cstdint>
#include <numeric>

#include <fmt/format.h>

namespace idist {

namespace detail {

void check_src(const ComputationModel& model, int src, std::string_view fn) {
  const int n = model.world_size();
  if (src < 0 || src >= n)
    throw ValueError(fmt::format("{}: src should be a rank in [0, {}), but given {}", fn, n, src));
}

std::vector<std::byte> all_gather_varying(ConstBuffer in, const Group& group, std::vector<std::size_t>& counts) {
  ComputationModel& m = current_model();
  const std::size_t esize = dtype_size(in.dtype);
  const ProcessGroup& pg = m.process_group(group);
  if (!pg.is_member()) {
    counts = {in.count};
    const auto* p = static_cast<const std::byte*>(in.data);
    return std::vector<std::byte>(p, p + in.bytes());
  }
  const std::size_t n = std::size_t(pg.size());
  std::int64_t mine = std::int64_t(in.count);
  std::vector<std::int64_t> all(n);
  m.all_gather(ConstBuffer{&mine, 1, DType::Int64}, Buffer{all.data(), n, DType::Int64}, group, Completion::Blocking);
  counts.assign(all.begin(), all.end());
  const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
  std::vector<std::byte> out(total * esize);
  if (total == 0) return out;
  const Buffer dst{out.data(), total, in.dtype, Device{}};
  const bool equal = std::all_of(counts.begin(), counts.end(), [&](std::size_t c) { return c == counts[0]; });
  if (equal)
    m.all_gather(in, dst, group, Completion::Blocking);
  else
    m.all_gather_v(in, dst, counts, group, Completion::Blocking);
  return out;
}

void broadcast_bytes(std::vector<std::byte>& bytes, bool present, int src, std::string_view what) {
  ComputationModel& m = current_model();
  const bool is_src = m.rank() == src;
  std::int64_t header = is_src ? (present ? std::int64_t(bytes.size()) : -1) : 0;
  m.broadcast(Buffer{&header, 1, DType::Int64, Device{}}, src, Group{}, Completion::Blocking);
  if (header < 0)
    throw ValueError(fmt::format("{}: source data can not be std::nullopt (source rank {} passed none)", what, src));
  if (!is_src) bytes.resize(std::size_t(header));
  if (header > 0)
    m.broadcast(Buffer{bytes.data(), bytes.size(), DType::UInt8, Device{}}, src, Group{}, Completion::Blocking);
}

void check_broadcast_presence(bool present, bool is_src, bool safe_mode) {
  if (present) return;
  const std::string_view op = to_string(OpType::Broadcast);
  if (is_src) throw ValueError(fmt::format("{}: source data can not be std::nullopt", op));
  if (!safe_mode)
    throw ValueError(fmt::format("{}: safe_mode should be true if std::nullopt is passed on a non-source rank", op));
}

}  // namespace detail

std::vector<std::string> all_gather(std::string_view s, const Group& group) {
  std::vector<std::size_t> counts;
  const std::vector<std::byte> bytes =
      detail::all_gather_varying(ConstBuffer{s.data(), s.size(), DType::UInt8}, group, counts);
  std::vector<std::string> out;
  out.reserve(counts.size());
  std::size_t offset = 0;
  for (std::size_t c : counts) {
    out.emplace_back(reinterpret_cast<const char*>(bytes.data()) + offset, c);
    offset += c;
  }
  return out;
}

std::vector<std::vector<std::byte>> all_gather_object(std::span<const std::byte> blob, const Group& group) {
  std::vector<std::size_t> counts;
  const std::vector<std::byte> bytes =
      detail::all_gather_varying(ConstBuffer{blob.data(), blob.size(), DType::UInt8}, group, counts);
  std::vector<std::vector<std::byte>> out;
  out.reserve(counts.size());
  std::size_t offset = 0;
  for (std::size_t c : counts) {
    out.emplace_back(bytes.begin() + std::ptrdiff_t(offset), bytes.begin() + std::ptrdiff_t(offset + c));
    offset += c;
  }
  return out;
}

std::string broadcast(std::string value, int src) {
  return broadcast(std::optional<std::string>(std::move(value)), src, false);
}

std::string broadcast(std::optional<std::string> value, int src, bool safe_mode) {
  ComputationModel& m = current_model();
  detail::check_src(m, src, to_string(OpType::Broadcast));
  const bool is_src = m.rank() == src;
  if (!safe_mode) detail::check_broadcast_presence(value.has_value(), is_src, safe_mode);
  std::vector<std::byte> bytes;
  if (is_src && value) {
    const auto* p = reinterpret_cast<const std::byte*>(value->data());
    bytes.assign(p, p + value->size());
  }
  detail::broadcast_bytes(bytes, !is_src || value.has_value(), src, to_string(OpType::Broadcast));
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

std::string broadcast(std::string value, int src, bool safe_mode) {
  return broadcast(std::optional<std::string>(std::move(value)), src, safe_mode);
}

std::filesystem::path broadcast(const std::filesystem::path& value, int src, bool safe_mode) {
  return broadcast(std::optional<std::filesystem::path>(value), src, safe_mode);
}

std::filesystem::path broadcast(const std::filesystem::path& value, int src) {
  return broadcast(std::optional<std::filesystem::path>(value), src, false);
}

std::filesystem::path broadcast(std::optional<std::filesystem::path> value, int src, bool safe_mode) {
  std::optional<std::string> text;
  if (value) text = value->native();
  return std::filesystem::path(broadcast(std::move(text), src, safe_mode));
}

std::vector<std::byte> broadcast_object(std::span<const std::byte> blob, int src) {
  ComputationModel& m = current_model();
  detail::check_src(m, src, "broadcast_object");
  std::vector<std::byte> bytes;
  if (m.rank() == src) bytes.assign(blob.begin(), blob.end());
  detail::broadcast_bytes(bytes, true, src, "broadcast_object");
  return bytes;
}

Work barrier_async(const Group& group) { return current_model().barrier(group); }

void barrier(const Group& group) { current_model().barrier(group, Completion::Blocking); }

Group new_group(std::vector<int> ranks) {
  ComputationModel& m = current_model();
  if (ranks.empty()) {
    if (!m.backend()) return Group{};  // ignite's serial new_group([]) == []
    throw ValueError("new_group: ranks should be a non-empty list of world ranks, but given []");
  }
  // Validates and creates the communicator on every rank; the Group keeps the resolution.
  Group listed(std::move(ranks));
  const ProcessGroup& pg = m.process_group(listed);
  return Group(listed.ranks(), pg.shared_from_this());
}

}  // namespace idist
