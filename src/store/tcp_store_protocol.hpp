#pragma once
// Wire protocol of the TCPStore (version 3): one request, then one response, per exchange; a client
// sends its next request only after reading the response. All integers are little-endian.
// The first request of every connection is a HELLO; the server closes a connection whose first frame is
// anything else, or that sends no HELLO within the handshake timeout.
//
//   frame    := header payload
//   header   := u32 magic ("IDST": 0x54534449) | u8 code | u8[3] zero | u32 payload_length   (12 bytes)
//   str      := u32 length | length bytes
//
// Requests (code = opcode):
//   1 SET    payload := str key | str value                        -> OK, empty
//   2 GET    payload := u64 timeout_ms | str key                   -> OK, str value   (waits for the key)
//   3 WAIT   payload := u64 timeout_ms | u32 n | str key × n       -> OK, empty       (waits for all keys)
//   4 ADD    payload := str key | i64 delta                        -> OK, i64 new value
//   5 CHECK  payload := u32 n | str key × n                        -> OK, u8 all_present
//   6 HELLO  payload := u32 version | str token                    -> OK, empty; ERROR + close when the
//            version differs or the server has a token and this one is not it (<= kMaxHelloPayload)
// (Version 2 had a 7 JOIN; processes now join with the requests above, store_join.hpp.)
// Responses (code = status):
//   0 OK       payload as above
//   1 TIMEOUT  payload := u64 elapsed_ms | u32 joined | u32 world_size | u32 missing | u32 n | str key × n
//              (GET / WAIT whose keys did not all appear within timeout_ms; joined: the join counter
//              kJoinCountKey; world_size 0 = unknown; `missing` keys were absent, the first
//              n <= kMaxTimeoutReplyKeys of them are listed)
//   2 ERROR    payload := str message  (e.g. ADD on a value that is not a decimal integer)
//
// Limits: key 1..kMaxKeyBytes, value <= kMaxValueBytes, payload <= kMaxRequestPayload. The server closes
// the connection of a client that sends a bad magic, an unknown opcode, an oversized length, a payload
// that does not parse exactly, or any byte while its GET / WAIT is pending; other clients are unaffected.
// Counters (ADD) are stored as decimal text, so GET of a counter returns e.g. "3".
// Keys starting with kReservedPrefix are the server's bookkeeping (the world size): SET, and ADD with a
// non-zero delta, on them are refused with ERROR; only the server writes them.
// Resource bounds (see ServerConfig): payloads are read in chunks as they arrive, under a per-connection
// cap (kMaxRequestPayload, kMaxHelloPayload before the handshake) and a cap on the bytes buffered by all
// connections together; the number of connections is capped, the oldest connection without a handshake
// being closed to make room.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/store.hpp"

namespace idist::store::detail {

/// Set by the server at start when it knows world_size: clients compare it with their own, which catches
/// two jobs rendezvousing on the same MASTER_ADDR:MASTER_PORT.
inline constexpr const char* kWorldSizeKey = "idist/store/world_size";

/// Prefix of the keys only the server changes.
inline constexpr const char* kReservedPrefix = "idist/store/";

inline constexpr std::uint32_t kProtocolVersion = 3;
inline constexpr std::size_t kMaxTokenBytes = 1024;
inline constexpr std::size_t kMaxHelloPayload = kMaxTokenBytes + 64;
inline constexpr std::uint32_t kMagic = 0x54534449;  // bytes 'I' 'D' 'S' 'T' on the wire
inline constexpr std::size_t kHeaderBytes = 12;
inline constexpr std::size_t kMaxRequestPayload = kMaxValueBytes + kMaxKeyBytes + 64;
inline constexpr std::size_t kMaxResponsePayload = kMaxValueBytes + 64;  // a GET value; TIMEOUT lists are smaller
inline constexpr std::size_t kMaxTimeoutReplyKeys = 64;  // a TIMEOUT lists at most this many missing keys

enum class Op : std::uint8_t { Set = 1, Get = 2, Wait = 3, Add = 4, Check = 5, Hello = 6 };
enum class Status : std::uint8_t { Ok = 0, Timeout = 1, Error = 2 };

/// True for a known opcode.
bool valid_op(std::uint8_t code);
/// Name of an opcode for messages ("set", "get", ...).
const char* op_name(Op op);
/// True for a key of the server's bookkeeping (kReservedPrefix).
bool is_reserved_key(const std::string& key);

struct Header {
  std::uint8_t code = 0;
  std::uint32_t payload_length = 0;
};

/// Encodes a header into 12 bytes.
std::array<unsigned char, kHeaderBytes> encode_header(std::uint8_t code, std::uint32_t payload_length);
/// Decodes 12 bytes; nullopt when the magic or the reserved bytes are wrong.
std::optional<Header> decode_header(const unsigned char* bytes);

/// Appends little-endian fields to a payload.
class Writer {
 public:
  void u8(std::uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(std::uint32_t v);
  void u64(std::uint64_t v);
  void i64(std::int64_t v) { u64(static_cast<std::uint64_t>(v)); }
  void str(const std::string& s) { bytes(s.data(), s.size()); }
  void bytes(const char* data, std::size_t size);
  std::vector<char>& buffer() { return out_; }

 private:
  std::vector<char> out_;
};

/// Reads fields from a payload; every read returns false once the payload is exhausted or a length is
/// out of bounds, so a malformed request is detected without throwing.
class Reader {
 public:
  Reader(const char* data, std::size_t size) : p_(data), end_(data + size) {}
  bool u8(std::uint8_t& v);
  bool u32(std::uint32_t& v);
  bool u64(std::uint64_t& v);
  bool i64(std::int64_t& v);
  /// A str of at most `max` bytes (and at least `min`).
  bool str(std::string& s, std::size_t min, std::size_t max);
  bool bytes(std::vector<char>& v, std::size_t max);
  bool at_end() const { return p_ == end_; }

 private:
  const char* p_;
  const char* end_;
};

/// Contents of a TIMEOUT response.
struct TimeoutInfo {
  std::chrono::milliseconds elapsed{0};
  std::uint32_t joined = 0;
  std::uint32_t world_size = 0;
  std::uint32_t num_missing = 0;     // how many keys were missing
  std::vector<std::string> missing;  // the first of them
};

/// Parses a TIMEOUT payload; nullopt when malformed.
std::optional<TimeoutInfo> decode_timeout(const std::vector<char>& payload);

}  // namespace idist::store::detail
