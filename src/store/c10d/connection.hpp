#pragma once
// One TCP connection whose every step (resolve, connect, write, read) ends by a deadline; the bytes are
// the caller's (protocol.hpp builds them). Failures are returned, not thrown, so that the version probe
// can tell a closed connection from silence; the store turns them into idist errors. Internal.

#include <chrono>
#include <cstddef>
#include <functional>
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

/// A TCP connection; not thread safe (the store serializes its calls). After any status but Ok the
/// connection is closed and must not be used again. The I/O functions are virtual so that tests and the
/// fuzz target can stand in a scripted peer (C10dStoreOptions::connect) for the socket.
class Connection {
 public:
  Connection();
  virtual ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  /// One attempt to connect to host:port (every address the name resolves to, in order).
  virtual IoStatus connect(const std::string& host, int port, Clock::time_point deadline);
  /// Writes every byte of `bytes`.
  virtual IoStatus write(const std::vector<char>& bytes, Clock::time_point deadline);
  /// Reads exactly `n` bytes into `out`.
  virtual IoStatus read(void* out, std::size_t n, Clock::time_point deadline);
  /// Closes the connection (idempotent).
  virtual void close();
  /// True between a successful connect() and the first failure or close().
  virtual bool is_open() const;
  /// The system's words for the last failure ("Connection refused"); empty after Ok.
  virtual const std::string& error() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Opens a fresh, connected connection before the deadline; throws (TimeoutError / BackendError) when it
/// cannot.
using Connector = std::function<std::unique_ptr<Connection>(Clock::time_point deadline)>;

}  // namespace idist::store::c10d
