#pragma once
// A TCPStore client that speaks raw frames, for the hardening and fuzz tests: it may skip the handshake,
// send garbage or truncated frames, and tells when the server closed the connection.
#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <asio.hpp>

#include "store/tcp_store_protocol.hpp"

namespace idist::test {

/// One raw TCP connection to a TCPStore server on 127.0.0.1.
class RawStoreClient {
 public:
  /// Connects; throws asio's system_error when the connection is refused.
  explicit RawStoreClient(int port) : socket_(io_) {
    socket_.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
  }
  /// Sends bytes; false when the connection is already broken.
  bool send(const void* data, std::size_t size) {
    std::error_code ec;
    asio::write(socket_, asio::buffer(data, size), ec);
    return !ec;
  }
  /// Sends a header announcing `length` bytes and then `payload` (which may be shorter: truncated).
  bool send_frame(std::uint8_t code, const std::vector<char>& payload, std::optional<std::uint32_t> length = {}) {
    const auto h = store::detail::encode_header(code, length.value_or(static_cast<std::uint32_t>(payload.size())));
    return send(h.data(), h.size()) && (payload.empty() || send(payload.data(), payload.size()));
  }
  /// Sends a HELLO with `token`.
  bool hello(const std::string& token) {
    store::detail::Writer w;
    w.u32(store::detail::kProtocolVersion);
    w.str(token);
    return send_frame(static_cast<std::uint8_t>(store::detail::Op::Hello), w.buffer());
  }
  /// Reads one response within `timeout`: its status, or nullopt on timeout / EOF / a malformed header.
  std::optional<store::detail::Status> read_reply(std::chrono::milliseconds timeout) {
    std::array<unsigned char, store::detail::kHeaderBytes> h{};
    if (!read_exact(h.data(), h.size(), timeout)) return std::nullopt;
    const auto header = store::detail::decode_header(h.data());
    if (!header || header->payload_length > store::detail::kMaxResponsePayload) return std::nullopt;
    std::vector<char> body(header->payload_length);
    if (!body.empty() && !read_exact(body.data(), body.size(), timeout)) return std::nullopt;
    return static_cast<store::detail::Status>(header->code);
  }
  /// True when the server closes the connection within `timeout` (EOF or reset), discarding what it sends.
  bool closed_by_server(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{socket_.native_handle(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      if (::recv(socket_.native_handle(), buf, sizeof buf, 0) <= 0) return true;
    }
  }

 private:
  bool read_exact(void* out, std::size_t size, std::chrono::milliseconds timeout) {
    auto* p = static_cast<char*>(out);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (size > 0) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd pfd{socket_.native_handle(), POLLIN, 0};
      if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
      const auto n = ::recv(socket_.native_handle(), p, size, 0);
      if (n <= 0) return false;
      p += n;
      size -= static_cast<std::size_t>(n);
    }
    return true;
  }

  asio::io_context io_;
  asio::ip::tcp::socket socket_;
};

}  // namespace idist::test
