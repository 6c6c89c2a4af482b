#pragma once
// One client connection of the TCPStore server: the Asio I/O of the protocol (frame headers, payloads
// read in chunks under the server's memory cap, replies), the handshake deadline, and the timer and
// hang-up watch of a pending GET / WAIT. What a request means is the handlers' business
// (tcp_store_handlers.hpp).

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <asio.hpp>

#include "store/tcp_store_protocol.hpp"
#include "store/tcp_store_state.hpp"

namespace idist::store::detail {

struct ServerImpl;
struct Outcome;

/// A connection, alive while an Asio operation of it is pending. Server thread only.
class Session final : public std::enable_shared_from_this<Session>, private WaitListener {
 public:
  Session(ServerImpl& server, asio::ip::tcp::socket socket);

  /// Arms the handshake deadline and reads the first request.
  void start();
  bool authenticated() const noexcept { return authenticated_; }
  bool closed() const noexcept { return closed_; }
  /// Counts and logs the refusal (rate-limited), then closes this connection.
  void refuse(const std::string& reason, const std::string& detail = {});
  /// Closes this connection only, forgetting its pending request; idempotent.
  void close();

 private:
  void read_header();
  void on_header();
  void read_chunk();  // reads the payload in pieces, reserving memory only for bytes about to arrive
  void on_payload();
  void carry_out(Outcome outcome);
  void start_wait(Op op, std::vector<std::string> keys, std::uint64_t timeout_ms);
  std::shared_ptr<PendingWait> end_wait();
  void timeout_wait();
  void keys_present() override;
  void release_payload();
  void send(Status status, Writer payload);

  ServerImpl& server_;
  asio::ip::tcp::socket socket_;
  asio::steady_timer handshake_;
  asio::steady_timer wait_timer_;
  std::string peer_;
  bool authenticated_ = false;
  std::array<unsigned char, kHeaderBytes> header_{};
  Op op_ = Op::Set;
  std::size_t wanted_ = 0;    // payload length announced by the header
  std::size_t reserved_ = 0;  // bytes of the server's buffer budget held by payload_
  std::vector<char> payload_;
  std::vector<char> reply_;
  std::shared_ptr<PendingWait> waiting_;  // the pending GET / WAIT
  bool close_after_send_ = false;
  bool closed_ = false;
};

}  // namespace idist::store::detail
