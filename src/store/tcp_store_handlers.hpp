#pragma once
// The TCPStore server's request handlers: the check of a frame header, and one handler per request type
// that parses its payload exactly, applies it to the key-value state and says how the session answers.
// No sockets: the session (tcp_store_session.hpp) reads the frames and carries the outcome out, and the
// fuzz target (tests/fuzz) feeds them bytes directly.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "store/tcp_store_protocol.hpp"
#include "store/tcp_store_state.hpp"

namespace idist::store::detail {

/// How a session answers one request.
struct Outcome {
  enum class Action {
    Reply,  ///< send `status` with `payload`
    Close,  ///< refuse the client: count `refusal` and close the connection without a reply
    Wait,   ///< start the GET / WAIT `wait_op` on `wait_keys`, bounded by `wait_timeout_ms`
  };
  Action action = Action::Reply;
  Status status = Status::Ok;
  Writer payload;
  /// Reply, then close the connection (a refused handshake).
  bool close_after_reply = false;
  /// A HELLO was accepted: the connection is authenticated from now on.
  bool authenticated = false;
  /// Close: why. Reply: a refusal to count and log although a reply is sent (a refused handshake).
  std::string refusal;
  /// Printed with the first refusal of its reason.
  std::string refusal_detail;
  Op wait_op = Op::Wait;
  std::vector<std::string> wait_keys;
  std::uint64_t wait_timeout_ms = 0;
};

/// What a handler may see of its session and server.
struct RequestContext {
  KeyValueState& state;
  /// The job's token (ServerConfig::token); empty: any HELLO is admitted.
  const std::string& token;
  /// Whether the session completed its HELLO.
  bool authenticated = false;
};

/// What a session does with a request's 12-byte header: read `payload_length` bytes for `op`, or refuse
/// the client (`refusal` not empty: bad magic, unknown opcode, no HELLO first, longer than the limit).
struct HeaderVerdict {
  Op op = Op::Set;
  std::size_t payload_length = 0;
  std::string refusal;
  std::string refusal_detail;
};

/// Checks a request header (kHeaderBytes bytes) of a session that is `authenticated` or not yet.
HeaderVerdict check_header(const unsigned char* bytes, bool authenticated);

/// Handles one request of type `op` whose payload `r` reads (the session has checked that op is known
/// and that only a HELLO comes before authentication).
Outcome handle_request(Op op, Reader& r, const RequestContext& ctx);

}  // namespace idist::store::detail
