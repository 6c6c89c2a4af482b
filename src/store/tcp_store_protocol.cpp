#include "store/tcp_store_protocol.hpp"

#include <cstring>

namespace idist::store::detail {

bool valid_op(std::uint8_t code) {
  return code >= static_cast<std::uint8_t>(Op::Set) && code <= static_cast<std::uint8_t>(Op::Hello);
}

bool is_reserved_key(const std::string& key) { return key.starts_with(kReservedPrefix); }

const char* op_name(Op op) {
  switch (op) {
    case Op::Set: return "set";
    case Op::Get: return "get";
    case Op::Wait: return "wait";
    case Op::Add: return "add";
    case Op::Check: return "check";
    case Op::Hello: return "hello";
  }
  return "?";
}

namespace {
void put_u32(unsigned char* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
std::uint32_t get_u32(const unsigned char* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(p[i]) << (8 * i);
  return v;
}
}  // namespace

std::array<unsigned char, kHeaderBytes> encode_header(std::uint8_t code, std::uint32_t payload_length) {
  std::array<unsigned char, kHeaderBytes> h{};
  put_u32(h.data(), kMagic);
  h[4] = code;
  put_u32(h.data() + 8, payload_length);
  return h;
}

std::optional<Header> decode_header(const unsigned char* bytes) {
  if (get_u32(bytes) != kMagic || bytes[5] != 0 || bytes[6] != 0 || bytes[7] != 0) return std::nullopt;
  return Header{bytes[4], get_u32(bytes + 8)};
}

void Writer::u32(std::uint32_t v) {
  unsigned char b[4];
  put_u32(b, v);
  out_.insert(out_.end(), b, b + 4);
}

void Writer::u64(std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>(static_cast<unsigned char>(v >> (8 * i))));
}

void Writer::bytes(const char* data, std::size_t size) {
  u32(static_cast<std::uint32_t>(size));
  out_.insert(out_.end(), data, data + size);
}

bool Reader::u8(std::uint8_t& v) {
  if (end_ - p_ < 1) return false;
  v = static_cast<std::uint8_t>(*p_++);
  return true;
}

bool Reader::u32(std::uint32_t& v) {
  if (end_ - p_ < 4) return false;
  v = get_u32(reinterpret_cast<const unsigned char*>(p_));
  p_ += 4;
  return true;
}

bool Reader::u64(std::uint64_t& v) {
  if (end_ - p_ < 8) return false;
  v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(p_[i])) << (8 * i);
  p_ += 8;
  return true;
}

bool Reader::i64(std::int64_t& v) {
  std::uint64_t u = 0;
  if (!u64(u)) return false;
  v = static_cast<std::int64_t>(u);
  return true;
}

bool Reader::str(std::string& s, std::size_t min, std::size_t max) {
  std::uint32_t n = 0;
  if (!u32(n) || n < min || n > max || static_cast<std::size_t>(end_ - p_) < n) return false;
  s.assign(p_, n);
  p_ += n;
  return true;
}

bool Reader::bytes(std::vector<char>& v, std::size_t max) {
  std::uint32_t n = 0;
  if (!u32(n) || n > max || static_cast<std::size_t>(end_ - p_) < n) return false;
  v.assign(p_, p_ + n);
  p_ += n;
  return true;
}

std::optional<TimeoutInfo> decode_timeout(const std::vector<char>& payload) {
  Reader r(payload.data(), payload.size());
  TimeoutInfo info;
  std::uint64_t elapsed = 0;
  std::uint32_t n = 0;
  if (!r.u64(elapsed) || !r.u32(info.joined) || !r.u32(info.world_size) || !r.u32(info.num_missing) || !r.u32(n) ||
      n > kMaxTimeoutReplyKeys)
    return std::nullopt;
  info.elapsed = std::chrono::milliseconds(elapsed);
  for (std::uint32_t i = 0; i < n; ++i) {
    std::string key;
    if (!r.str(key, 1, kMaxKeyBytes)) return std::nullopt;
    info.missing.push_back(std::move(key));
  }
  if (!r.at_end()) return std::nullopt;
  return info;
}

}  // namespace idist::store::detail
