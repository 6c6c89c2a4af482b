#include "store/c10d/protocol.hpp"

#include <fmt/format.h>

#include "idist/error.hpp"

namespace idist::store::c10d {

namespace {

// Appends the `n` low bytes of `v`, least significant first.
void put_le(std::vector<char>& out, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void put_string(std::vector<char>& out, std::string_view s) {
  put_le(out, s.size(), 8);
  out.insert(out.end(), s.begin(), s.end());
}

std::vector<char> start(Version version, Query q) {
  const auto byte = query_byte(version, q);
  if (!byte) throw ValueError(fmt::format("c10d TCPStore protocol {} has no such query", version_name(version)));
  return {static_cast<char>(*byte)};
}

std::vector<char> encode_keys(Version version, Query q, const std::vector<std::string>& keys) {
  auto out = start(version, q);
  put_le(out, keys.size(), 8);
  for (const auto& k : keys) put_string(out, wire_key(k));
  return out;
}

}  // namespace

std::optional<std::uint8_t> query_byte(Version version, Query q) {
  // Version 1's numbering; version 2 inserted VALIDATE at 0 and dropped WATCH_KEY (7 in version 1),
  // which leaves the queries idist sends one higher.
  std::uint8_t v1 = 0;
  switch (q) {
    case Query::Validate: return version == Version::V2 ? std::optional<std::uint8_t>(0) : std::nullopt;
    case Query::Set: v1 = 0; break;
    case Query::Get: v1 = 2; break;
    case Query::Add: v1 = 3; break;
    case Query::Check: v1 = 4; break;
    case Query::Wait: v1 = 5; break;
    case Query::GetNumKeys: v1 = 6; break;
  }
  return version == Version::V1 ? v1 : static_cast<std::uint8_t>(v1 + 1);
}

std::string wire_key(std::string_view key) {
  std::string out;
  out.reserve(key.size() + 1);
  out.push_back('/');
  out.append(key);
  return out;
}

std::vector<char> encode_validate() {
  auto out = start(Version::V2, Query::Validate);
  put_le(out, kValidationMagic, 4);
  return out;
}

std::vector<char> encode_set(Version version, std::string_view key, const std::vector<char>& value) {
  auto out = start(version, Query::Set);
  put_string(out, wire_key(key));
  put_string(out, std::string_view(value.data(), value.size()));
  return out;
}

std::vector<char> encode_get(Version version, std::string_view key) {
  auto out = start(version, Query::Get);
  put_string(out, wire_key(key));
  return out;
}

std::vector<char> encode_add(Version version, std::string_view key, std::int64_t delta) {
  auto out = start(version, Query::Add);
  put_string(out, wire_key(key));
  put_le(out, static_cast<std::uint64_t>(delta), 8);
  return out;
}

std::vector<char> encode_check(Version version, const std::vector<std::string>& keys) {
  return encode_keys(version, Query::Check, keys);
}

std::vector<char> encode_wait(Version version, const std::vector<std::string>& keys) {
  return encode_keys(version, Query::Wait, keys);
}

std::vector<char> encode_get_num_keys(Version version) { return start(version, Query::GetNumKeys); }

std::vector<char> encode_hello(Version version) {
  if (version == Version::V1) return encode_get_num_keys(version);
  auto out = encode_validate();
  const auto q = encode_get_num_keys(version);
  out.insert(out.end(), q.begin(), q.end());
  return out;
}

std::uint64_t decode_u64(const unsigned char* bytes) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | bytes[i];
  return v;
}

std::int64_t decode_i64(const unsigned char* bytes) { return static_cast<std::int64_t>(decode_u64(bytes)); }

std::string version_name(Version version) { return std::to_string(static_cast<int>(version)); }

std::optional<Version> parse_version_override(std::string_view value) {
  if (value.empty()) return std::nullopt;
  if (value == "1") return Version::V1;
  if (value == "2") return Version::V2;
  throw ValueError(fmt::format(
      "IDIST_C10D_STORE_PROTOCOL should be 1 (torch 1.x and 2.0) or 2 (torch 2.1 and later), or unset to detect "
      "it, but given '{}'",
      value));
}

}  // namespace idist::store::c10d
