#pragma once
// Asio operations bounded by a deadline, shared by the store clients (idist's TCPStore client and the
// c10d TCPStore client). Internal; include only from files compiled with the Asio definitions.
#include <chrono>
#include <string>
#include <system_error>

#include <asio.hpp>

namespace idist::store::asio_deadline {

using Clock = std::chrono::steady_clock;

/// Runs `io`'s pending asynchronous operation until `done` or `deadline`. Past the deadline `cancel`
/// aborts it and its handler is drained, so that nothing refers to the caller's frame afterwards.
/// True when the operation completed.
template <class Cancel>
bool run_until(asio::io_context& io, const bool& done, Clock::time_point deadline, Cancel cancel) {
  io.restart();
  while (!done && io.run_one_until(deadline) > 0) {
  }
  if (done) return true;
  cancel();
  io.restart();
  io.run();
  return false;
}

/// What one connection attempt came to: `timed_out` with the step that did not finish, else `error`
/// (empty: connected, with TCP_NODELAY set).
struct ConnectResult {
  bool timed_out = false;
  const char* unfinished = "";
  std::error_code error;
};

/// Resolves `host` and connects `socket` to it, before `deadline`; one attempt, no retry. On a timeout
/// the socket is closed.
inline ConnectResult connect_once(asio::io_context& io, asio::ip::tcp::socket& socket, const std::string& host,
                                  int port, Clock::time_point deadline) {
  using asio::ip::tcp;
  bool done = false;
  std::error_code ec;
  tcp::resolver resolver(io);
  tcp::resolver::results_type endpoints;
  resolver.async_resolve(host, std::to_string(port), [&](std::error_code e, tcp::resolver::results_type r) {
    ec = e;
    endpoints = std::move(r);
    done = true;
  });
  if (!run_until(io, done, deadline, [&] { resolver.cancel(); }))
    return {true, "resolving the host name did not finish", {}};
  if (ec) return {false, "", ec};
  done = false;
  asio::async_connect(socket, endpoints, [&](std::error_code e, const tcp::endpoint&) {
    ec = e;
    done = true;
  });
  if (!run_until(io, done, deadline, [&] {
        std::error_code ignored;
        socket.close(ignored);
      }))
    return {true, "the connection attempt did not finish", {}};
  if (ec) return {false, "", ec};
  std::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  return {};
}

}  // namespace idist::store::asio_deadline
