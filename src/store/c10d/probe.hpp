#pragma once
// Tells which c10d TCPStore protocol (protocol.hpp) a server speaks, without ever changing a key and
// without leaving a version-1 server stalled for longer than one short, growing bound.
//
// A round, with bound b (kFirstProbeBound, doubling each round, never past the deadline):
// Each round says hello (protocol.hpp's encode_hello) in one version and then the other:
//  1. On a fresh connection, version 1's GETNUMKEYS (the single byte 6), then wait up to b:
//     - an 8-byte reply: version 1 (torch 1.x / 2.0 answer it and change nothing) -> use this connection;
//     - the connection closes: version 2's threaded backend (a first query other than VALIDATE);
//     - silence: version 2's libuv backend (it ignores a first query other than VALIDATE), or a slow
//       server. The connection is closed without sending more (libuv would read a later byte as a
//       request).
//  2. On a fresh connection, VALIDATE then version 2's GETNUMKEYS (6 bytes), then wait up to b:
//     - an 8-byte reply: version 2 -> use this connection;
//     - otherwise close it. A version-1 server reads these bytes as the start of a SET whose key length
//       is still incomplete, so it allocates nothing and sets nothing; it waits, and our close ends that.
// Rounds repeat until the deadline; then TimeoutError suggests IDIST_C10D_STORE_PROTOCOL.
// Never sent: version 2's VALIDATE alone to an unknown server followed by more bytes, which a version-1
// server would take as a SET with a huge key length.

#include <chrono>
#include <memory>
#include <string>

#include "store/c10d/connection.hpp"
#include "store/c10d/protocol.hpp"

namespace idist::store::c10d {

/// The first round's bound; each later round doubles it. The trade-off: a libuv server (torch 2.4 and
/// later by default) costs one bound per C10dStore (IDIST_C10D_STORE_PROTOCOL=2 saves it), while a
/// version-1 server meets step 2's stall only when it took longer than the bound to answer step 1.
inline constexpr std::chrono::milliseconds kFirstProbeBound{500};
/// The least time detection gets once a server has accepted the connection, whatever the store's
/// timeout: one round of both protocols, with room for the second connection.
inline constexpr std::chrono::milliseconds kMinDetection = 2 * kFirstProbeBound + std::chrono::milliseconds(500);

/// A version and the open connection that proved it (version 2: already validated).
struct Probed {
  Version version;
  std::unique_ptr<Connection> connection;
};

/// Sends encode_hello(version) on `conn` and reads its 8-byte reply before `bound`: Ok proves that the
/// server speaks `version`. Used on every connection, so that a wrong IDIST_C10D_STORE_PROTOCOL fails
/// without harm instead of sending requests the server would misread.
IoStatus hello(Connection& conn, Version version, Clock::time_point bound);

/// Runs the rounds above until `deadline`, extended to kMinDetection after a server has accepted.
/// `where` names the store in messages.
/// @throws TimeoutError when no round decided; what `connect` throws.
Probed probe_version(const Connector& connect, Clock::time_point deadline, const std::string& where);

}  // namespace idist::store::c10d
