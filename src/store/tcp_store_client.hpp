#pragma once
// The client half of TCPStore: one TCP connection, every operation bounded by a deadline (Asio's
// asynchronous operations driven by run_one_until). Internal.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "store/tcp_store_protocol.hpp"

namespace idist::store::detail {

struct ClientImpl;

/// One connection to a TCPStore server. Thread safe (calls are serialized).
class TCPStoreClient {
 public:
  using Clock = std::chrono::steady_clock;

  struct Response {
    Status status = Status::Ok;
    std::vector<char> payload;
  };

  /// Connects to host:port, retrying refused / failed attempts until `connect_timeout` has passed
  /// (the server may start after its clients), and sends the handshake (HELLO with `token`) on this and
  /// every later connection.
  /// @throws TimeoutError naming host:port, the elapsed time and the last connection error; BackendError
  ///         when the server refuses the handshake (wrong or missing token, other protocol version).
  TCPStoreClient(std::string host, int port, std::chrono::milliseconds connect_timeout, std::string token = {});
  ~TCPStoreClient();
  TCPStoreClient(const TCPStoreClient&) = delete;
  TCPStoreClient& operator=(const TCPStoreClient&) = delete;

  /// Sends one request and returns its response, all before `deadline`; reconnects first (within the
  /// same deadline) when an earlier call broke the connection. `what` names the call in messages
  /// ("get('rank_0')").
  /// @throws TimeoutError when the deadline passes; BackendError when the connection fails or the response
  ///         is malformed. Either way the connection is dropped and the next call reconnects.
  Response call(Op op, const std::vector<char>& payload, Clock::time_point deadline, const std::string& what);

  /// "tcp://host:port".
  std::string describe() const;

 private:
  std::unique_ptr<ClientImpl> impl_;
};

}  // namespace idist::store::detail
