#pragma once
// The wire protocol of PyTorch's c10d TCPStore, as its server (what torchrun's agent serves) reads it:
// encoding of the requests idist sends and decoding of the replies. No I/O here (connection.hpp does
// that). Integers travel in the host's byte order, which is little-endian on every platform PyTorch
// runs its stores on; this file writes and reads little-endian explicitly.
//
//   request   := [u32 magic] u8 query | arguments
//   string    := u64 length | length bytes          (keys and values alike)
//   SET       := string key | string value          -> nothing
//   GET       := string key                         -> string value (a missing key: version 1 and the
//                                                       threaded version 2 close the connection, libuv's
//                                                       answers an empty value; so WAIT for it first)
//   ADD       := string key | i64 delta             -> i64 new value (closes on a non-integer value)
//   CHECK     := u64 n | string key × n             -> u8 0 READY / 1 NOT_READY
//   WAIT      := u64 n | string key × n             -> u8 0 STOP_WAITING once every key exists; no
//                                                       timeout on the wire
//   GETNUMKEYS                                      -> i64 number of keys
//   VALIDATE  := u32 0x3C85F7CE                     -> nothing (version 2 only; first on a connection)
//
// Two versions, told apart by the server's reaction to the first request (probe.hpp):
//   Version 1 (torch 1.x and 2.0; TCPStore.cpp): queries SET 0, COMPARE_SET 1, GET 2, ADD 3, CHECK 4,
//     WAIT 5, GETNUMKEYS 6, WATCH_KEY 7, DELETE_KEY 8; no handshake; an unknown query closes the
//     connection. The server is one thread that reads a request with blocking reads: a partial request
//     stalls every client until it completes or its connection closes.
//   Version 2 (torch 2.1 and later; TCPStoreBackend.cpp, TCPStoreLibUvBackend.cpp): VALIDATE 0 and every
//     other query shifted by one (SET 1, COMPARE_SET 2, GET 3, ADD 4, CHECK 5, WAIT 6, GETNUMKEYS 7,
//     DELETE_KEY 8, APPEND 9, MULTI_GET 10, MULTI_SET 11, CANCEL_WAIT 12, PING 13). The first query of a
//     connection must be VALIDATE: the threaded backend closes a connection that starts otherwise, the
//     libuv backend ignores its first query and answers nothing.
// c10d's TCPStore client puts "/" before every key (PrefixStore "p" then gives "/p/key"); so does
// wire_key(), so that torch's clients and idist's see the same keys.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace idist::store::c10d {

/// Which c10d TCPStore protocol a server speaks.
enum class Version : int { V1 = 1, V2 = 2 };

/// The requests idist sends.
enum class Query { Validate, Set, Get, Add, Check, Wait, GetNumKeys };

/// The magic number of version 2's VALIDATE.
inline constexpr std::uint32_t kValidationMagic = 0x3C85F7CE;
/// CHECK's replies.
inline constexpr std::uint8_t kCheckReady = 0;
inline constexpr std::uint8_t kCheckNotReady = 1;
/// WAIT's reply once every key exists.
inline constexpr std::uint8_t kWaitStopWaiting = 0;
/// Bytes of an i64 / u64 on the wire.
inline constexpr std::size_t kIntBytes = 8;
/// The smallest limits among the servers (torch 2.x's libuv backend closes the connection past them):
/// a value's bytes, and the keys of one CHECK or WAIT. Keys are shorter than that backend's 8 KiB anyway
/// (idist's own limit, store.hpp).
inline constexpr std::size_t kMaxValueBytes = std::size_t{8} << 20;
inline constexpr std::size_t kMaxKeysPerRequest = std::size_t{128} * 1024;

/// The query byte of `q` in `version`; nullopt where the version has no such query (VALIDATE in 1).
std::optional<std::uint8_t> query_byte(Version version, Query q);

/// "/" + key: the key c10d's TCPStore client sends for `key`.
std::string wire_key(std::string_view key);

/// VALIDATE (version 2): query byte and magic number.
std::vector<char> encode_validate();
/// SET of wire_key(key).
std::vector<char> encode_set(Version version, std::string_view key, const std::vector<char>& value);
/// GET of wire_key(key).
std::vector<char> encode_get(Version version, std::string_view key);
/// ADD of `delta` to wire_key(key).
std::vector<char> encode_add(Version version, std::string_view key, std::int64_t delta);
/// CHECK of wire_key(k) for every key.
std::vector<char> encode_check(Version version, const std::vector<std::string>& keys);
/// WAIT for wire_key(k) of every key.
std::vector<char> encode_wait(Version version, const std::vector<std::string>& keys);
/// GETNUMKEYS (no argument; replies an i64 and changes nothing: the version probe's request).
std::vector<char> encode_get_num_keys(Version version);
/// The first request idist sends on every connection: GETNUMKEYS, after VALIDATE in version 2. Its
/// i64 reply proves the version; it changes nothing on a server of either version (a version-1 server
/// reads version 2's 6 bytes as an unfinished SET and waits; a version-2 server never runs version 1's
/// byte as a query).
std::vector<char> encode_hello(Version version);

/// Reads a little-endian i64 (ADD's and GETNUMKEYS' replies).
std::int64_t decode_i64(const unsigned char* bytes);
/// Reads a little-endian u64 (the length before GET's value).
std::uint64_t decode_u64(const unsigned char* bytes);

/// "1" / "2" for messages.
std::string version_name(Version version);
/// Parses IDIST_C10D_STORE_PROTOCOL: "" -> nullopt (probe), "1" or "2" -> that version.
/// @throws ValueError naming the variable and the value otherwise.
std::optional<Version> parse_version_override(std::string_view value);

}  // namespace idist::store::c10d
