#include "store/tcp_store_client.hpp"

#include <algorithm>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <asio.hpp>

#include "idist/error.hpp"
#include "store/asio_deadline.hpp"

namespace idist::store::detail {

namespace {
using asio::ip::tcp;
using Clock = TCPStoreClient::Clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }
}  // namespace

struct ClientImpl {
  std::string host;
  int port;
  std::string token;
  asio::io_context io;
  tcp::socket socket{io};
  bool connected = false;
  std::mutex mutex;

  std::string describe() const { return fmt::format("tcp://{}:{}", host, port); }

  void drop() {
    std::error_code ec;
    socket.close(ec);
    connected = false;
  }

  template <class Cancel>
  bool run_until(const bool& done, Clock::time_point deadline, Cancel cancel) {
    return asio_deadline::run_until(io, done, deadline, cancel);
  }

  // Connects, retrying until `deadline` with a growing pause (10 ms .. 200 ms) between attempts.
  void connect(Clock::time_point deadline, Clock::time_point start) {
    std::string last_error = "no attempt was made";
    auto pause = std::chrono::milliseconds(10);
    for (;;) {
      if (Clock::now() >= deadline) break;
      const auto r = asio_deadline::connect_once(io, socket, host, port, deadline);
      if (r.timed_out) {
        last_error = r.unfinished;
        break;
      }
      if (!r.error) {
        connected = true;
        hello(deadline, start);
        return;
      }
      drop();
      last_error = r.error.message();
      const auto now = Clock::now();
      if (now + pause >= deadline) {
        std::this_thread::sleep_until(deadline);
        break;
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(200));
    }
    throw TimeoutError(fmt::format(
        "TCPStore {}: could not connect to the store within {:.2f} s (last error: {}); is rank 0 serving it "
        "(check MASTER_ADDR / MASTER_PORT or the init_method)?",
        describe(), seconds_since(start), last_error));
  }

  // The first request of every connection: the protocol version and the job's token.
  void hello(Clock::time_point deadline, Clock::time_point start) {
    Writer w;
    w.u32(kProtocolVersion);
    w.str(token);
    const auto r = exchange(Op::Hello, w.buffer(), deadline, start, "the handshake");
    if (r.status == Status::Ok && r.payload.empty()) return;
    drop();
    Reader reader(r.payload.data(), r.payload.size());
    std::string message = "malformed reply";
    if (r.status == Status::Error) reader.str(message, 0, r.payload.size());
    throw BackendError(fmt::format("TCPStore {}: {}", describe(), message));
  }

  // Sends one request and reads its response, all before `deadline`.
  TCPStoreClient::Response exchange(Op op, const std::vector<char>& payload, Clock::time_point deadline,
                                    Clock::time_point start, const std::string& what) {
    const auto header = encode_header(static_cast<std::uint8_t>(op), static_cast<std::uint32_t>(payload.size()));
    const std::array<asio::const_buffer, 2> request{asio::buffer(header), asio::buffer(payload)};
    transfer<decltype(request), true>(request, deadline, start, what);

    std::array<unsigned char, kHeaderBytes> reply_header{};
    transfer<decltype(asio::buffer(reply_header)), false>(asio::buffer(reply_header), deadline, start, what);
    const auto h = decode_header(reply_header.data());
    if (!h || h->code > static_cast<std::uint8_t>(Status::Error) || h->payload_length > kMaxResponsePayload) {
      drop();
      throw BackendError(fmt::format("TCPStore {}: malformed response to {} (is {} an idist TCPStore?)", describe(),
                                     what, describe()));
    }
    TCPStoreClient::Response response;
    response.status = static_cast<Status>(h->code);
    response.payload.resize(h->payload_length);
    if (!response.payload.empty())
      transfer<decltype(asio::buffer(response.payload)), false>(asio::buffer(response.payload), deadline, start, what);
    return response;
  }

  // Reads or writes `buffers` completely before `deadline`; throws (dropping the connection) otherwise.
  template <class Buffers, bool Write>
  void transfer(const Buffers& buffers, Clock::time_point deadline, Clock::time_point start, const std::string& what) {
    bool done = false;
    std::error_code ec;
    auto handler = [&](std::error_code e, std::size_t) {
      ec = e;
      done = true;
    };
    if constexpr (Write)
      asio::async_write(socket, buffers, handler);
    else
      asio::async_read(socket, buffers, handler);
    if (!run_until(done, deadline, [&] { drop(); })) {
      throw TimeoutError(
          fmt::format("TCPStore {}: {} got no response within {:.2f} s", describe(), what, seconds_since(start)));
    }
    if (ec) {
      drop();
      throw BackendError(fmt::format(
          "TCPStore {}: connection lost during {} after {:.2f} s: {} (the server on rank 0 exited, or closed "
          "the connection over a malformed request)",
          describe(), what, seconds_since(start), ec.message()));
    }
  }
};

TCPStoreClient::TCPStoreClient(std::string host, int port, std::chrono::milliseconds connect_timeout, std::string token)
    : impl_(std::make_unique<ClientImpl>()) {
  impl_->host = std::move(host);
  impl_->port = port;
  impl_->token = std::move(token);
  const auto start = Clock::now();
  impl_->connect(start + connect_timeout, start);
}

TCPStoreClient::~TCPStoreClient() {
  std::lock_guard lock(impl_->mutex);
  impl_->drop();
}

std::string TCPStoreClient::describe() const { return impl_->describe(); }

TCPStoreClient::Response TCPStoreClient::call(Op op, const std::vector<char>& payload, Clock::time_point deadline,
                                              const std::string& what) {
  std::lock_guard lock(impl_->mutex);
  const auto start = Clock::now();
  if (!impl_->connected) impl_->connect(deadline, start);
  return impl_->exchange(op, payload, deadline, start, what);
}

}  // namespace idist::store::detail
