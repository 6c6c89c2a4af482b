// The TCPStore server: one Asio io_context on one thread owns the key-value map, the sessions and the
// pending GET / WAIT requests, so no lock guards the data. Only the connection count, read by the owner
// during shutdown, is shared with other threads.
#include "store/tcp_store_server.hpp"

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <limits>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <asio.hpp>
#include <fmt/format.h>

#include "idist/error.hpp"
#include "store/tcp_store.hpp"
#include "store/tcp_store_protocol.hpp"

namespace idist::store::detail {

namespace {
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

// Longest server-side wait honoured; larger requests are clamped (a year is "forever" here and keeps the
// timer arithmetic far from overflow).
constexpr std::uint64_t kMaxWaitMs = std::uint64_t{365} * 24 * 3600 * 1000;

class Session;

// A GET or WAIT whose keys are not all present yet.
struct Waiter {
  explicit Waiter(asio::io_context& io) : timer(io) {}
  std::shared_ptr<Session> session;
  Op op = Op::Wait;
  std::string get_key;               // GET: the key whose value is returned
  std::vector<std::string> missing;  // keys still absent
  Clock::time_point start;
  asio::steady_timer timer;
};

// Strict decimal parse of a counter value.
std::optional<std::int64_t> parse_i64(const std::vector<char>& v) {
  std::int64_t out = 0;
  const char* first = v.data();
  const char* last = v.data() + v.size();
  auto [ptr, ec] = std::from_chars(first, last, out);
  if (v.empty() || ec != std::errc() || ptr != last) return std::nullopt;
  return out;
}
}  // namespace

struct ServerImpl {
  ServerImpl(int port, int world_size);
  ~ServerImpl();

  void accept();
  void on_key_set(const std::string& key);
  void remove_waiter(const std::shared_ptr<Waiter>& w) { waiters.remove(w); }
  std::uint32_t joined() const;
  void session_opened() {
    std::lock_guard lock(mutex);
    ++connections;
  }
  void session_closed() {
    {
      std::lock_guard lock(mutex);
      --connections;
    }
    cv.notify_all();
  }

  asio::io_context io;  // first member: destroyed last, after everything that holds its objects
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_retry{io};
  int world_size;
  int port = 0;  // the bound port, read by other threads
  std::unordered_map<std::string, std::vector<char>> data;
  std::list<std::shared_ptr<Waiter>> waiters;
  std::list<std::weak_ptr<Session>> sessions;  // for shutdown
  mutable std::mutex mutex;
  std::condition_variable cv;
  int connections = 0;
  std::thread thread;
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(ServerImpl& server, tcp::socket socket) : server_(server), socket_(std::move(socket)) {}

  void start() { read_header(); }

  // Closes this connection only; idempotent.
  void close() {
    if (closed_) return;
    closed_ = true;
    if (waiter_) {
      waiter_->timer.cancel();
      server_.remove_waiter(waiter_);
      waiter_->session.reset();  // break the session <-> waiter cycle
      waiter_.reset();
    }
    std::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    server_.session_closed();
  }

  // The keys of the pending GET / WAIT are all present: reply.
  void complete_wait() {
    auto w = std::move(waiter_);
    w->timer.cancel();
    std::error_code ec;
    socket_.cancel(ec);  // the readability watch
    w->session.reset();
    Writer out;
    if (w->op == Op::Get) {
      const auto& value = server_.data.at(w->get_key);
      out.bytes(value.data(), value.size());
    }
    send(Status::Ok, std::move(out));
  }

  // The pending GET / WAIT ran out of time: reply TIMEOUT with what is missing.
  void timeout_wait() {
    auto w = std::move(waiter_);
    server_.remove_waiter(w);
    std::error_code ec;
    socket_.cancel(ec);
    w->session.reset();
    Writer out;
    out.u64(static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - w->start).count()));
    out.u32(server_.joined());
    out.u32(server_.world_size > 0 ? static_cast<std::uint32_t>(server_.world_size) : 0);
    out.u32(static_cast<std::uint32_t>(w->missing.size()));
    const auto n = std::min(w->missing.size(), kMaxTimeoutReplyKeys);
    out.u32(static_cast<std::uint32_t>(n));
    for (std::size_t i = 0; i < n; ++i) out.str(w->missing[i]);
    send(Status::Timeout, std::move(out));
  }

  bool waiting_on(const std::shared_ptr<Waiter>& w) const { return waiter_ && waiter_ == w; }

 private:
  void read_header() {
    asio::async_read(socket_, asio::buffer(header_), [self = shared_from_this()](std::error_code ec, std::size_t) {
      if (ec) return self->close();
      self->on_header();
    });
  }

  void on_header() {
    const auto h = decode_header(header_.data());
    if (!h || !valid_op(h->code) || h->payload_length > kMaxRequestPayload) return close();
    op_ = static_cast<Op>(h->code);
    try {
      payload_.assign(h->payload_length, 0);
    } catch (const std::bad_alloc&) {
      return close();
    }
    if (payload_.empty()) return on_payload();
    asio::async_read(socket_, asio::buffer(payload_), [self = shared_from_this()](std::error_code ec, std::size_t) {
      if (ec) return self->close();
      self->on_payload();
    });
  }

  // Parses and executes one request; a request that does not parse exactly closes the connection.
  void on_payload() {
    Reader r(payload_.data(), payload_.size());
    switch (op_) {
      case Op::Set: {
        std::string key;
        std::vector<char> value;
        if (!r.str(key, 1, kMaxKeyBytes) || !r.bytes(value, kMaxValueBytes) || !r.at_end()) return close();
        release_payload();
        server_.data[key] = std::move(value);
        send(Status::Ok, Writer{});
        server_.on_key_set(key);
        return;
      }
      case Op::Add: {
        std::string key;
        std::int64_t delta = 0;
        if (!r.str(key, 1, kMaxKeyBytes) || !r.i64(delta) || !r.at_end()) return close();
        release_payload();
        std::int64_t current = 0;
        if (auto it = server_.data.find(key); it != server_.data.end()) {
          const auto parsed = parse_i64(it->second);
          if (!parsed) return send_error(fmt::format("add: key '{}' holds a value that is not a decimal integer", key));
          current = *parsed;
        }
        std::int64_t result = 0;
        if (__builtin_add_overflow(current, delta, &result))
          return send_error(fmt::format("add: counter '{}' = {} + {} overflows int64", key, current, delta));
        const auto text = std::to_string(result);
        server_.data[key] = std::vector<char>(text.begin(), text.end());
        Writer out;
        out.i64(result);
        send(Status::Ok, std::move(out));
        server_.on_key_set(key);
        if (key == kJoinedKey && server_.world_size > 0 && result == server_.world_size) {
          server_.data[kAllJoinedKey] = {'1'};
          server_.on_key_set(kAllJoinedKey);
        }
        return;
      }
      case Op::Check: {
        std::vector<std::string> keys;
        if (!read_keys(r, keys) || !r.at_end()) return close();
        release_payload();
        const bool all = std::all_of(keys.begin(), keys.end(), [&](const auto& k) { return server_.data.count(k) > 0; });
        Writer out;
        out.u8(all ? 1 : 0);
        return send(Status::Ok, std::move(out));
      }
      case Op::Get: {
        std::uint64_t timeout_ms = 0;
        std::string key;
        if (!r.u64(timeout_ms) || !r.str(key, 1, kMaxKeyBytes) || !r.at_end()) return close();
        release_payload();
        return start_wait(Op::Get, {key}, timeout_ms);
      }
      case Op::Wait: {
        std::uint64_t timeout_ms = 0;
        std::vector<std::string> keys;
        if (!r.u64(timeout_ms) || !read_keys(r, keys) || !r.at_end()) return close();
        release_payload();
        return start_wait(Op::Wait, std::move(keys), timeout_ms);
      }
    }
    close();
  }

  static bool read_keys(Reader& r, std::vector<std::string>& keys) {
    std::uint32_t n = 0;
    if (!r.u32(n)) return false;
    for (std::uint32_t i = 0; i < n; ++i) {
      std::string key;
      if (!r.str(key, 1, kMaxKeyBytes)) return false;
      keys.push_back(std::move(key));
    }
    return true;
  }

  void release_payload() { std::vector<char>().swap(payload_); }

  void start_wait(Op op, std::vector<std::string> keys, std::uint64_t timeout_ms) {
    auto w = std::make_shared<Waiter>(server_.io);
    w->op = op;
    w->get_key = op == Op::Get ? keys.front() : std::string{};
    for (auto& k : keys)
      if (!server_.data.count(k)) w->missing.push_back(std::move(k));
    w->start = Clock::now();
    w->session = shared_from_this();
    waiter_ = w;
    if (w->missing.empty()) return complete_wait();
    server_.waiters.push_back(w);
    w->timer.expires_after(std::chrono::milliseconds(std::min(timeout_ms, kMaxWaitMs)));
    w->timer.async_wait([self = shared_from_this(), w](std::error_code ec) {
      if (ec || !self->waiting_on(w)) return;
      self->timeout_wait();
    });
    // A well-behaved client sends nothing while its request is pending: readability means it hung up
    // (or broke the protocol), so the waiter is dropped at once instead of lingering until its timeout.
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this(), w](std::error_code ec) {
      if (ec == asio::error::operation_aborted || !self->waiting_on(w)) return;
      self->close();
    });
  }

  void send_error(const std::string& message) {
    Writer out;
    out.str(message);
    send(Status::Error, std::move(out));
  }

  void send(Status status, Writer payload) {
    auto& body = payload.buffer();
    const auto header = encode_header(static_cast<std::uint8_t>(status), static_cast<std::uint32_t>(body.size()));
    reply_.assign(header.begin(), header.end());
    reply_.insert(reply_.end(), body.begin(), body.end());
    asio::async_write(socket_, asio::buffer(reply_), [self = shared_from_this()](std::error_code ec, std::size_t) {
      if (ec) return self->close();
      std::vector<char>().swap(self->reply_);
      self->read_header();
    });
  }

  ServerImpl& server_;
  tcp::socket socket_;
  std::array<unsigned char, kHeaderBytes> header_{};
  Op op_ = Op::Set;
  std::vector<char> payload_;
  std::vector<char> reply_;
  std::shared_ptr<Waiter> waiter_;
  bool closed_ = false;
};

}  // namespace

ServerImpl::ServerImpl(int port, int world_size_) : world_size(world_size_) {
  if (world_size > 0) {
    const auto text = std::to_string(world_size);
    data[kWorldSizeKey] = std::vector<char>(text.begin(), text.end());
  }
  // Every interface, IPv6 dual-stack when the host has IPv6, else IPv4.
  std::error_code ec;
  auto listen_on = [&](const tcp::endpoint& ep, bool v6) {
    ec.clear();
    acceptor.open(ep.protocol(), ec);
    if (!ec && v6) acceptor.set_option(asio::ip::v6_only(false), ec);
    if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor.bind(ep, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      std::error_code ignored;
      acceptor.close(ignored);
    }
  };
  listen_on(tcp::endpoint(tcp::v6(), static_cast<unsigned short>(port)), true);
  if (ec && ec != asio::error::address_in_use)
    listen_on(tcp::endpoint(tcp::v4(), static_cast<unsigned short>(port)), false);
  if (ec)
    throw BackendError(fmt::format("TCPStore server: cannot listen on port {} of every interface: {}", port, ec.message()));
  this->port = acceptor.local_endpoint().port();
  accept();
  thread = std::thread([this] {
    for (;;) {
      try {
        io.run();
        return;
      } catch (const std::exception& e) {  // a handler failed (e.g. out of memory): keep serving the others
        std::fprintf(stderr, "idist TCPStore server: %s\n", e.what());
      }
    }
  });
}

ServerImpl::~ServerImpl() {
  io.stop();
  if (thread.joinable()) thread.join();
  // Break the session <-> waiter cycles; sessions still referenced only by handlers are destroyed with io.
  for (auto& w : waiters) w->session.reset();
  waiters.clear();
  for (auto& weak : sessions)
    if (auto s = weak.lock()) s->close();
  std::error_code ec;
  acceptor.close(ec);
}

void ServerImpl::accept() {
  acceptor.async_accept([this](std::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (ec) {  // e.g. out of file descriptors: try again shortly instead of spinning
      accept_retry.expires_after(std::chrono::milliseconds(50));
      accept_retry.async_wait([this](std::error_code e) {
        if (!e) accept();
      });
      return;
    }
    std::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    auto session = std::make_shared<Session>(*this, std::move(socket));
    sessions.remove_if([](const std::weak_ptr<Session>& s) { return s.expired(); });
    sessions.push_back(session);
    session_opened();
    session->start();
    accept();
  });
}

void ServerImpl::on_key_set(const std::string& key) {
  for (auto it = waiters.begin(); it != waiters.end();) {
    auto w = *it;
    std::erase(w->missing, key);
    if (!w->missing.empty()) {
      ++it;
      continue;
    }
    it = waiters.erase(it);
    if (auto session = w->session; session && session->waiting_on(w)) session->complete_wait();
  }
}

std::uint32_t ServerImpl::joined() const {
  const auto it = data.find(kJoinedKey);
  if (it == data.end()) return 0;
  const auto v = parse_i64(it->second);
  return v && *v > 0 ? static_cast<std::uint32_t>(std::min<std::int64_t>(*v, std::numeric_limits<std::uint32_t>::max())) : 0;
}

TCPStoreServer::TCPStoreServer(int port, int world_size) : impl_(std::make_unique<ServerImpl>(port, world_size)) {}

TCPStoreServer::~TCPStoreServer() = default;

int TCPStoreServer::port() const { return impl_->port; }

int TCPStoreServer::num_connections() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->connections;
}

bool TCPStoreServer::wait_until_no_clients(std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->mutex);
  return impl_->cv.wait_for(lock, timeout, [&] { return impl_->connections == 0; });
}

}  // namespace idist::store::detail
