// One client connection of the TCPStore server (see tcp_store_session.hpp).
#include "store/tcp_store_session.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "store/tcp_store_handlers.hpp"
#include "store/tcp_store_server_impl.hpp"

namespace idist::store::detail {

namespace {
using asio::ip::tcp;

// Longest server-side wait honoured; larger requests are clamped (a year is "forever" here and keeps the
// timer arithmetic far from overflow).
constexpr std::uint64_t kMaxWaitMs = std::uint64_t{365} * 24 * 3600 * 1000;
// Payloads are read in pieces of at most this size, so memory follows the bytes that arrived rather than
// the length a header announced.
constexpr std::size_t kReadChunk = std::size_t{64} << 10;
// Requests up to this size are outside the shared buffer budget, so that connections holding the budget
// with large unfinished payloads cannot lock out the small requests of rendezvous (HELLO, the join's counters,
// the peer table). Their total is bounded by max_connections x kSmallRequest.
constexpr std::size_t kSmallRequest = std::size_t{4} << 10;
}  // namespace

Session::Session(ServerImpl& server, tcp::socket socket)
    : server_(server), socket_(std::move(socket)), handshake_(server.io), wait_timer_(server.io) {
  std::error_code ec;
  const auto ep = socket_.remote_endpoint(ec);
  peer_ = ec ? std::string("?") : fmt::format("{}:{}", ep.address().to_string(), ep.port());
}

void Session::start() {
  handshake_.expires_after(server_.config.handshake_timeout);
  handshake_.async_wait([self = shared_from_this()](std::error_code ec) {
    if (ec || self->authenticated_ || self->closed_) return;
    self->refuse("no handshake within the handshake timeout");
  });
  read_header();
}

void Session::refuse(const std::string& reason, const std::string& detail) {
  server_.refuse(reason, peer_, detail);
  close();
}

void Session::close() {
  if (closed_) return;
  closed_ = true;
  handshake_.cancel();
  if (waiting_) {
    wait_timer_.cancel();
    server_.state.cancel(waiting_);
    waiting_.reset();
  }
  release_payload();
  std::error_code ec;
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  server_.session_closed();
}

void Session::read_header() {
  asio::async_read(socket_, asio::buffer(header_), [self = shared_from_this()](std::error_code ec, std::size_t) {
    if (ec) return self->close();
    self->on_header();
  });
}

void Session::on_header() {
  const auto v = check_header(header_.data(), authenticated_);
  if (!v.refusal.empty()) return refuse(v.refusal, v.refusal_detail);
  op_ = v.op;
  wanted_ = v.payload_length;
  release_payload();
  read_chunk();
}

void Session::read_chunk() {
  if (payload_.size() == wanted_) return on_payload();
  const std::size_t have = payload_.size();
  const std::size_t n = std::min(kReadChunk, wanted_ - have);
  const std::size_t before = payload_.capacity();
  if (wanted_ <= kSmallRequest) {
    payload_.reserve(wanted_);
  } else if (have + n > before) {
    const std::size_t after = std::min(wanted_, std::max(have + n, 2 * before));
    if (!server_.reserve(after - before)) return refuse("request buffers of all connections reached their cap");
    reserved_ += after - before;
    payload_.reserve(after);
  }
  payload_.resize(have + n);
  asio::async_read(socket_, asio::buffer(payload_.data() + have, n),
                   [self = shared_from_this()](std::error_code ec, std::size_t) {
                     if (ec) return self->close();
                     self->read_chunk();
                   });
}

void Session::on_payload() {
  Reader r(payload_.data(), payload_.size());
  Outcome outcome = handle_request(op_, r, RequestContext{server_.state, server_.config.token, authenticated_});
  release_payload();
  carry_out(std::move(outcome));
}

void Session::carry_out(Outcome o) {
  switch (o.action) {
    case Outcome::Action::Close: return refuse(o.refusal, o.refusal_detail);
    case Outcome::Action::Wait: return start_wait(o.wait_op, std::move(o.wait_keys), o.wait_timeout_ms);
    case Outcome::Action::Reply: break;
  }
  if (!o.refusal.empty()) server_.refuse(o.refusal, peer_, o.refusal_detail);
  if (o.authenticated) {
    authenticated_ = true;
    handshake_.cancel();
  }
  close_after_send_ = o.close_after_reply;
  send(o.status, std::move(o.payload));
}

void Session::start_wait(Op op, std::vector<std::string> keys, std::uint64_t timeout_ms) {
  auto w = server_.state.wait(op, std::move(keys), this);
  waiting_ = w;
  if (w->missing.empty()) return keys_present();
  wait_timer_.expires_after(std::chrono::milliseconds(std::min(timeout_ms, kMaxWaitMs)));
  wait_timer_.async_wait([self = shared_from_this(), w](std::error_code ec) {
    if (ec || self->waiting_ != w) return;
    self->timeout_wait();
  });
  // A well-behaved client sends nothing while its request is pending: readability means it hung up
  // (or broke the protocol), so the request is dropped at once instead of lingering until its timeout.
  socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this(), w](std::error_code ec) {
    if (ec == asio::error::operation_aborted || self->waiting_ != w) return;
    self->close();
  });
}

std::shared_ptr<PendingWait> Session::end_wait() {
  auto w = std::move(waiting_);
  wait_timer_.cancel();
  std::error_code ec;
  socket_.cancel(ec);  // the readability watch
  return w;
}

void Session::keys_present() {
  auto w = end_wait();
  send(Status::Ok, server_.state.ok_reply(*w));
}

void Session::timeout_wait() {
  auto w = end_wait();
  server_.state.cancel(w);
  send(Status::Timeout, server_.state.timeout_reply(*w, KeyValueState::Clock::now()));
}

void Session::release_payload() {
  std::vector<char>().swap(payload_);
  if (reserved_ > 0) server_.release(reserved_);
  reserved_ = 0;
}

void Session::send(Status status, Writer payload) {
  auto& body = payload.buffer();
  const auto header = encode_header(static_cast<std::uint8_t>(status), static_cast<std::uint32_t>(body.size()));
  reply_.assign(header.begin(), header.end());
  reply_.insert(reply_.end(), body.begin(), body.end());
  asio::async_write(socket_, asio::buffer(reply_), [self = shared_from_this()](std::error_code ec, std::size_t) {
    if (ec || self->close_after_send_) return self->close();
    std::vector<char>().swap(self->reply_);
    self->read_header();
  });
}

}  // namespace idist::store::detail
