#pragma once
// One TCP connection whose every step (resolve, connect, write, read) ends by a deadline; the bytes are
// the caller's (protocol.hpp builds them). Failures are returned, not thrown, so that the version probe
// can tell a closed connection from silence; the store turns them into idist errors. Internal.

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace idist::store::c10d {

using Clock = std::chrono::steady_clock;

/// How a step ended.
enum class IoStatus {
  Ok,        ///< done
  Closed,    ///< the peer closed or reset the connection (or refused it, for connect)
  TimedOut,  ///< the deadline passed first
  Failed,    ///< another error (see the message)
};

/// A connection; not thread safe (the store serializes its calls). After any status but Ok the
/// connection is closed and must not be used again.
class Connection {
 public:
  Connection();
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  /// One attempt to connect to host:port (every address the name resolves to, in order).
  IoStatus connect(const std::string& host, int port, Clock::time_point deadline);
  /// Writes every byte of `bytes`.
  IoStatus write(const std::vector<char>& bytes, Clock::time_point deadline);
  /// Reads exactly `n` bytes into `out`.
  IoStatus read(void* out, std::size_t n, Clock::time_point deadline);
  /// Closes the connection (idempotent).
  void close();
  /// True between a successful connect() and the first failure or close().
  bool is_open() const;
  /// The system's words for the last failure ("Connection refused"); empty after Ok.
  const std::string& error() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace idist::store::c10d
