// The TCPStore server: one Asio io_context on one thread owns the key-value map, the sessions and the
// pending GET / WAIT requests, so no lock guards the data. Only the counters (ServerStats), read by the
// owner during shutdown and by tests, are shared with other threads.
#include "store/tcp_store_server.hpp"

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <limits>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <sys/resource.h>

#include <fmt/format.h>
#include <asio.hpp>

#include "idist/error.hpp"
#include "store/reject_log.hpp"
#include "store/tcp_store.hpp"
#include "store/tcp_store_protocol.hpp"

namespace idist::store::detail {

namespace {
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

// Longest server-side wait honoured; larger requests are clamped (a year is "forever" here and keeps the
// timer arithmetic far from overflow).
constexpr std::uint64_t kMaxWaitMs = std::uint64_t{365} * 24 * 3600 * 1000;
// Payloads are read in pieces of at most this size, so memory follows the bytes that arrived rather than
// the length a header announced.
constexpr std::size_t kReadChunk = std::size_t{64} << 10;
// Requests up to this size are outside the shared buffer budget, so that connections holding the budget
// with large unfinished payloads cannot lock out the small requests of rendezvous (HELLO, JOIN, the peer
// table). Their total is bounded by max_connections x kSmallRequest (16 MiB at the default cap of 4096).
constexpr std::size_t kSmallRequest = std::size_t{4} << 10;

// Compares every byte whatever the first difference, so the timing does not tell how much of a guessed
// token was right.
bool same_token(const std::string& given, const std::string& expected) {
  if (given.size() != expected.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < given.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ expected[i]);
  return diff == 0;
}

int default_max_connections() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return 4096;
  return static_cast<int>(std::clamp<rlim_t>(lim.rlim_cur / 2, 64, 4096));
}

// One process's claim of a rank (JOIN).
struct Claim {
  std::string host;
  std::uint32_t pid = 0;
};

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
  ServerImpl(int port, int world_size, ServerConfig config);
  ~ServerImpl();

  void listen(const std::string& address, int port);
  void accept(tcp::acceptor& acceptor);
  void on_key_set(const std::string& key);
  // A rank was claimed twice: every wait for kAllJoinedKey fails with `message` from now on.
  void fail_join(const std::string& message);
  void remove_waiter(const std::shared_ptr<Waiter>& w) { waiters.remove(w); }
  std::uint32_t joined() const;
  int num_connections_now() {
    std::lock_guard lock(mutex);
    return stats.connections;
  }
  // Closes the oldest connection still without a handshake; false when there is none.
  bool evict_unauthenticated();
  void session_opened() {
    std::lock_guard lock(mutex);
    ++stats.connections;
  }
  void session_closed() {
    {
      std::lock_guard lock(mutex);
      --stats.connections;
    }
    cv.notify_all();
  }
  // Reserves `n` more buffered request bytes; false when the cap would be exceeded.
  bool reserve(std::size_t n) {
    std::lock_guard lock(mutex);
    if (stats.buffered_bytes + n > config.max_buffered_bytes) return false;
    stats.buffered_bytes += n;
    stats.peak_buffered_bytes = std::max(stats.peak_buffered_bytes, stats.buffered_bytes);
    return true;
  }
  void release(std::size_t n) {
    std::lock_guard lock(mutex);
    stats.buffered_bytes -= n;
  }
  void refuse(const std::string& reason, const std::string& peer, const std::string& detail = {}) {
    rejects.note(reason, peer, detail);
    std::lock_guard lock(mutex);
    ++stats.refused;
  }

  asio::io_context io;  // first member: destroyed last, after everything that holds its objects
  std::list<tcp::acceptor> acceptors;
  std::vector<std::string> addresses;
  asio::steady_timer accept_retry{io};
  int world_size;
  ServerConfig config;
  int port = 0;  // the bound port, read by other threads
  std::unordered_map<std::string, std::vector<char>> data;
  std::map<std::int64_t, Claim> claims;  // rank -> the process that joined with it
  std::string join_failure;              // set by fail_join
  std::list<std::shared_ptr<Waiter>> waiters;
  std::list<std::weak_ptr<Session>> sessions;  // in accept order: for eviction and shutdown
  RejectLog rejects;
  mutable std::mutex mutex;  // guards stats
  std::condition_variable cv;
  ServerStats stats;
  std::thread thread;
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(ServerImpl& server, tcp::socket socket) : server_(server), socket_(std::move(socket)), handshake_(server.io) {
    std::error_code ec;
    const auto ep = socket_.remote_endpoint(ec);
    peer_ = ec ? std::string("?") : fmt::format("{}:{}", ep.address().to_string(), ep.port());
  }

  void start() {
    handshake_.expires_after(server_.config.handshake_timeout);
    handshake_.async_wait([self = shared_from_this()](std::error_code ec) {
      if (ec || self->authenticated_ || self->closed_) return;
      self->refuse("no handshake within the handshake timeout");
    });
    read_header();
  }

  bool authenticated() const { return authenticated_; }
  bool closed() const { return closed_; }

  // Logs the refusal (rate-limited) and closes this connection.
  void refuse(const std::string& reason, const std::string& detail = {}) {
    server_.refuse(reason, peer_, detail);
    close();
  }

  // Closes this connection only; idempotent.
  void close() {
    if (closed_) return;
    closed_ = true;
    handshake_.cancel();
    if (waiter_) {
      waiter_->timer.cancel();
      server_.remove_waiter(waiter_);
      waiter_->session.reset();  // break the session <-> waiter cycle
      waiter_.reset();
    }
    release_payload();
    std::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    server_.session_closed();
  }

  // The keys of the pending GET / WAIT are all present: reply.
  void complete_wait() {
    auto w = end_wait();
    Writer out;
    if (w->op == Op::Get) {
      const auto& value = server_.data.at(w->get_key);
      out.bytes(value.data(), value.size());
    }
    send(Status::Ok, std::move(out));
  }

  // The pending GET / WAIT ran out of time: reply TIMEOUT with what is missing.
  void timeout_wait() {
    auto w = end_wait();
    server_.remove_waiter(w);
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

  // The pending GET / WAIT cannot succeed (a rank was claimed twice): reply ERROR.
  void fail_wait(const std::string& message) {
    end_wait();
    send_error(message);
  }

  bool waiting_on(const std::shared_ptr<Waiter>& w) const { return waiter_ && waiter_ == w; }

 private:
  std::shared_ptr<Waiter> end_wait() {
    auto w = std::move(waiter_);
    w->timer.cancel();
    std::error_code ec;
    socket_.cancel(ec);  // the readability watch
    w->session.reset();
    return w;
  }

  void read_header() {
    asio::async_read(socket_, asio::buffer(header_), [self = shared_from_this()](std::error_code ec, std::size_t) {
      if (ec) return self->close();
      self->on_header();
    });
  }

  void on_header() {
    const auto h = decode_header(header_.data());
    if (!h) return refuse("bad frame header (not an idist TCPStore client?)");
    if (!valid_op(h->code)) return refuse("unknown opcode", fmt::format("{}", h->code));
    op_ = static_cast<Op>(h->code);
    if (!authenticated_ && op_ != Op::Hello) return refuse("first request is not a handshake (HELLO)");
    const std::size_t cap = authenticated_ ? kMaxRequestPayload : kMaxHelloPayload;
    if (h->payload_length > cap)
      return refuse("request longer than the limit",
                    fmt::format("{} of {} bytes, limit {}", op_name(op_), h->payload_length, cap));
    wanted_ = h->payload_length;
    release_payload();
    read_chunk();
  }

  // Reads the payload in pieces, reserving memory only for bytes about to arrive.
  void read_chunk() {
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

  // Parses and executes one request; a request that does not parse exactly closes the connection.
  void on_payload() {
    Reader r(payload_.data(), payload_.size());
    switch (op_) {
      case Op::Hello: return on_hello(r);
      case Op::Join: return on_join(r);
      case Op::Set: {
        std::string key;
        std::vector<char> value;
        if (!r.str(key, 1, kMaxKeyBytes) || !r.bytes(value, kMaxValueBytes) || !r.at_end())
          return refuse("malformed set");
        release_payload();
        if (is_reserved_key(key)) return send_error(reserved_message("set", key));
        server_.data[key] = std::move(value);
        send(Status::Ok, Writer{});
        server_.on_key_set(key);
        return;
      }
      case Op::Add: {
        std::string key;
        std::int64_t delta = 0;
        if (!r.str(key, 1, kMaxKeyBytes) || !r.i64(delta) || !r.at_end()) return refuse("malformed add");
        release_payload();
        if (delta != 0 && is_reserved_key(key)) return send_error(reserved_message("add", key));
        std::int64_t current = 0;
        if (auto it = server_.data.find(key); it != server_.data.end()) {
          const auto parsed = parse_i64(it->second);
          if (!parsed) return send_error(fmt::format("add: key '{}' holds a value that is not a decimal integer", key));
          current = *parsed;
        }
        std::int64_t result = 0;
        if (__builtin_add_overflow(current, delta, &result))
          return send_error(fmt::format("add: counter '{}' = {} + {} overflows int64", key, current, delta));
        // A read (delta 0) of a reserved key creates nothing: ADD 0 on kAllJoinedKey must not release the join wait.
        const bool store = !is_reserved_key(key);
        if (store) {
          const auto text = std::to_string(result);
          server_.data[key] = std::vector<char>(text.begin(), text.end());
        }
        Writer out;
        out.i64(result);
        send(Status::Ok, std::move(out));
        if (store) server_.on_key_set(key);
        return;
      }
      case Op::Check: {
        std::vector<std::string> keys;
        if (!read_keys(r, keys) || !r.at_end()) return refuse("malformed check");
        release_payload();
        const bool all =
            std::all_of(keys.begin(), keys.end(), [&](const auto& k) { return server_.data.count(k) > 0; });
        Writer out;
        out.u8(all ? 1 : 0);
        return send(Status::Ok, std::move(out));
      }
      case Op::Get: {
        std::uint64_t timeout_ms = 0;
        std::string key;
        if (!r.u64(timeout_ms) || !r.str(key, 1, kMaxKeyBytes) || !r.at_end()) return refuse("malformed get");
        release_payload();
        return start_wait(Op::Get, {key}, timeout_ms);
      }
      case Op::Wait: {
        std::uint64_t timeout_ms = 0;
        std::vector<std::string> keys;
        if (!r.u64(timeout_ms) || !read_keys(r, keys) || !r.at_end()) return refuse("malformed wait");
        release_payload();
        return start_wait(Op::Wait, std::move(keys), timeout_ms);
      }
    }
    close();
  }

  static std::string reserved_message(const char* op, const std::string& key) {
    return fmt::format("{}: key '{}' is the store's own bookkeeping (prefix '{}'), which no client may change", op, key,
                       kReservedPrefix);
  }

  void on_hello(Reader& r) {
    std::uint32_t version = 0;
    std::string token;
    if (!r.u32(version) || !r.str(token, 0, kMaxTokenBytes) || !r.at_end()) return refuse("malformed handshake");
    release_payload();
    if (authenticated_) return refuse("second handshake");
    if (version != kProtocolVersion) {
      server_.refuse("other protocol version", peer_, fmt::format("{}, expected {}", version, kProtocolVersion));
      return send_error(fmt::format("the server speaks TCPStore protocol version {}, this client {} (mixed idist "
                                    "versions in one job?)",
                                    kProtocolVersion, version),
                        true);
    }
    if (!server_.config.token.empty() && !same_token(token, server_.config.token)) {
      const char* why = token.empty() ? "no store token" : "wrong store token";
      server_.refuse(why, peer_);
      return send_error(fmt::format("the server refused this client: {} (every process of a job needs the token "
                                    "of rank 0: IDIST_STORE_TOKEN, set for its workers by spawn / Parallel)",
                                    why),
                        true);
    }
    authenticated_ = true;
    handshake_.cancel();
    send(Status::Ok, Writer{});
  }

  void on_join(Reader& r) {
    std::int64_t rank = -1;
    Claim claim;
    if (!r.i64(rank) || !r.str(claim.host, 0, kMaxHostBytes) || !r.u32(claim.pid) || !r.at_end())
      return refuse("malformed join");
    release_payload();
    if (rank >= 0) {
      if (auto it = server_.claims.find(rank); it != server_.claims.end()) {
        const auto message = fmt::format(
            "rank {} was claimed by two processes: pid {} on host '{}' and pid {} on host '{}' (is RANK set to the "
            "same value twice, or do two jobs share MASTER_ADDR:MASTER_PORT?)",
            rank, it->second.pid, it->second.host, claim.pid, claim.host);
        server_.fail_join(message);
        return send_error(message);
      }
      server_.claims.emplace(rank, claim);
    }
    const std::int64_t joined = server_.joined() + 1;
    const auto text = std::to_string(joined);
    server_.data[kJoinedKey] = std::vector<char>(text.begin(), text.end());
    Writer out;
    out.i64(joined);
    send(Status::Ok, std::move(out));
    server_.on_key_set(kJoinedKey);
    if (server_.world_size > 0 && joined == server_.world_size) {
      server_.data[kAllJoinedKey] = {'1'};
      server_.on_key_set(kAllJoinedKey);
    }
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

  void release_payload() {
    std::vector<char>().swap(payload_);
    if (reserved_ > 0) server_.release(reserved_);
    reserved_ = 0;
  }

  void start_wait(Op op, std::vector<std::string> keys, std::uint64_t timeout_ms) {
    if (!server_.join_failure.empty() && std::find(keys.begin(), keys.end(), kAllJoinedKey) != keys.end())
      return send_error(server_.join_failure);
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

  // Replies ERROR; with `then_close` the connection is closed once the reply is written.
  void send_error(const std::string& message, bool then_close = false) {
    Writer out;
    out.str(message);
    close_after_send_ = then_close;
    send(Status::Error, std::move(out));
  }

  void send(Status status, Writer payload) {
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

  ServerImpl& server_;
  tcp::socket socket_;
  asio::steady_timer handshake_;
  std::string peer_;
  bool authenticated_ = false;
  std::array<unsigned char, kHeaderBytes> header_{};
  Op op_ = Op::Set;
  std::size_t wanted_ = 0;    // payload length announced by the header
  std::size_t reserved_ = 0;  // bytes of the server's buffer budget held by payload_
  std::vector<char> payload_;
  std::vector<char> reply_;
  std::shared_ptr<Waiter> waiter_;
  bool close_after_send_ = false;
  bool closed_ = false;
};

}  // namespace

ServerImpl::ServerImpl(int port_, int world_size_, ServerConfig config_)
    : world_size(world_size_), config(std::move(config_)) {
  if (config.max_connections <= 0) config.max_connections = default_max_connections();
  if (world_size > 0) {
    const auto text = std::to_string(world_size);
    data[kWorldSizeKey] = std::vector<char>(text.begin(), text.end());
  }
  if (config.bind_addresses.empty()) {
    listen("", port_);
  } else {
    // Port 0: the first address picks a free port and the others listen on the same one.
    for (const auto& address : config.bind_addresses) listen(address, port == 0 ? port_ : port);
  }
  for (auto& acceptor : acceptors) accept(acceptor);
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
  for (auto& acceptor : acceptors) acceptor.close(ec);
}

// Listens on `address` ("": every interface, IPv6 dual-stack when the host has IPv6, else IPv4).
void ServerImpl::listen(const std::string& address, int at_port) {
  std::error_code ec;
  auto& acceptor = acceptors.emplace_back(io);
  auto listen_on = [&](const tcp::endpoint& ep, bool dual_stack) {
    ec.clear();
    acceptor.open(ep.protocol(), ec);
    if (!ec && dual_stack) acceptor.set_option(asio::ip::v6_only(false), ec);
    if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor.bind(ep, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      std::error_code ignored;
      acceptor.close(ignored);
    }
  };
  const auto p = static_cast<unsigned short>(at_port);
  std::string shown = address;
  if (address.empty()) {
    listen_on(tcp::endpoint(tcp::v6(), p), true);
    if (ec && ec != asio::error::address_in_use) listen_on(tcp::endpoint(tcp::v4(), p), false);
    shown = "every interface";
  } else {
    std::error_code parse;
    const auto ip = asio::ip::make_address(address, parse);
    if (parse)
      throw ValueError(fmt::format("TCPStore server: bind address should be an IP address, got '{}'", address));
    listen_on(tcp::endpoint(ip, p), false);
  }
  if (ec)
    throw BackendError(
        fmt::format("TCPStore server: cannot listen on port {} of {}: {}", at_port, shown, ec.message()));
  port = acceptor.local_endpoint().port();
  addresses.push_back(address.empty() ? std::string("::") : address);
}

void ServerImpl::accept(tcp::acceptor& acceptor) {
  acceptor.async_accept([this, &acceptor](std::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (ec) {  // e.g. out of file descriptors: try again shortly instead of spinning
      accept_retry.expires_after(std::chrono::milliseconds(50));
      accept_retry.async_wait([this, &acceptor](std::error_code e) {
        if (!e) accept(acceptor);
      });
      return;
    }
    std::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    sessions.remove_if([](const std::weak_ptr<Session>& s) { return s.expired() || s.lock()->closed(); });
    if (num_connections_now() >= config.max_connections && !evict_unauthenticated()) {
      const auto ep = socket.remote_endpoint(ignored);
      refuse("connection cap reached, every connection authenticated",
             fmt::format("{}:{}", ep.address().to_string(), ep.port()), fmt::format("cap {}", config.max_connections));
      socket.close(ignored);
    } else {
      auto session = std::make_shared<Session>(*this, std::move(socket));
      sessions.push_back(session);
      session_opened();
      session->start();
    }
    accept(acceptor);
  });
}

bool ServerImpl::evict_unauthenticated() {
  for (auto& weak : sessions) {
    auto s = weak.lock();
    if (s && !s->closed() && !s->authenticated()) {
      s->refuse("connection cap reached: oldest connection without a handshake closed",
                fmt::format("cap {}", config.max_connections));
      return true;
    }
  }
  return false;
}

void ServerImpl::fail_join(const std::string& message) {
  if (join_failure.empty()) {
    join_failure = message;
    data[kConflictKey] = std::vector<char>(message.begin(), message.end());
  }
  for (auto it = waiters.begin(); it != waiters.end();) {
    auto w = *it;
    if (std::find(w->missing.begin(), w->missing.end(), kAllJoinedKey) == w->missing.end()) {
      ++it;
      continue;
    }
    it = waiters.erase(it);
    if (auto session = w->session; session && session->waiting_on(w)) session->fail_wait(message);
  }
  on_key_set(kConflictKey);
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
  return v && *v > 0 ? static_cast<std::uint32_t>(std::min<std::int64_t>(*v, std::numeric_limits<std::uint32_t>::max()))
                     : 0;
}

TCPStoreServer::TCPStoreServer(int port, int world_size, ServerConfig config)
    : impl_(std::make_unique<ServerImpl>(port, world_size, std::move(config))) {}

TCPStoreServer::~TCPStoreServer() = default;

int TCPStoreServer::port() const { return impl_->port; }

std::vector<std::string> TCPStoreServer::addresses() const { return impl_->addresses; }

int TCPStoreServer::num_connections() const { return stats().connections; }

ServerStats TCPStoreServer::stats() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->stats;
}

bool TCPStoreServer::wait_until_no_clients(std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->mutex);
  return impl_->cv.wait_for(lock, timeout, [&] { return impl_->stats.connections == 0; });
}

}  // namespace idist::store::detail
