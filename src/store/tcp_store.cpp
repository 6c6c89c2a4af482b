#include "store/tcp_store.hpp"

#include <cstdio>

#include <fmt/format.h>

#include <asio/ip/address.hpp>

#include "idist/error.hpp"
#include "store/store_join.hpp"
#include "store/tcp_store_client.hpp"
#include "store/tcp_store_protocol.hpp"
#include "store/tcp_store_server.hpp"

namespace idist::store {

namespace {
using detail::Op;
using detail::Status;
using Clock = std::chrono::steady_clock;

// How long past a GET / WAIT's own timeout the client waits for the server's TIMEOUT reply before giving
// up on the server itself.
constexpr auto kReplySlack = std::chrono::seconds(1);

[[noreturn]] void throw_unexpected(const std::string& where, const std::string& what,
                                   const detail::TCPStoreClient::Response& r);
}  // namespace

namespace {
// The default listening addresses: only the loopback when clients reach the server through it, since
// nothing beyond this host could use another interface anyway; else every interface.
std::vector<std::string> default_bind(const std::string& host) {
  if (host == "localhost") return {"127.0.0.1"};
  std::error_code ec;
  const auto ip = asio::ip::make_address(host, ec);
  if (!ec && ip.is_loopback()) return {ip.to_string()};
  return {};
}
}  // namespace

TCPStore::TCPStore(std::string host, int port, bool is_server, int world_size, std::chrono::milliseconds timeout,
                   bool wait_for_workers, TCPStoreOptions options)
    : host_(std::move(host)), port_(port), world_size_(world_size), timeout_(timeout) {
  const auto start = Clock::now();
  if (host_.empty()) throw ValueError("TCPStore: host should be a host name or address, got ''");
  if (port < 0 || port > 65535 || (port == 0 && !is_server))
    throw ValueError(
        fmt::format("TCPStore: port should be in [1, 65535] (or 0 on the server for any free port), "
                    "got {}",
                    port));
  if (timeout.count() <= 0)
    throw ValueError(fmt::format("TCPStore: timeout should be positive, got {} ms", timeout.count()));
  if (is_server) {
    detail::ServerConfig config;
    config.token = options.token;
    config.bind_addresses = options.bind_addresses.empty() ? default_bind(host_) : options.bind_addresses;
    server_ = std::make_unique<detail::TCPStoreServer>(port, world_size, std::move(config));
    port_ = server_->port();
  }
  client_ = std::make_unique<detail::TCPStoreClient>(host_, port_, timeout_, options.token);
  if (world_size > 0 && check({detail::kWorldSizeKey})) {  // before joining, so a stranger is not counted
    const auto served = get_string(detail::kWorldSizeKey);
    if (served != std::to_string(world_size))
      throw ValueError(
          fmt::format("TCPStore {}: the store serves a world of {} processes, but this process expects "
                      "world_size = {} (another job rendezvousing at the same address and port?)",
                      describe(), served, world_size));
  }
  announce_join(*this, options.rank, world_size);
  if ((is_server || options.clients_wait_for_workers) && wait_for_workers && world_size > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(timeout_ - (Clock::now() - start));
    this->wait_for_workers(std::max(left, std::chrono::milliseconds(1)));
  }
}

TCPStore::~TCPStore() {
  client_.reset();  // our own connection first, so that only other ranks' connections remain
  if (server_ && wait_on_close_ && !server_->wait_until_no_clients(timeout_)) {
    std::fprintf(stderr,
                 "idist TCPStore %s: %d client(s) still connected %lld ms after shutdown began; closing anyway\n",
                 describe().c_str(), server_->num_connections(), static_cast<long long>(timeout_.count()));
  }
  server_.reset();
}

std::vector<std::string> TCPStore::server_addresses() const {
  return server_ ? server_->addresses() : std::vector<std::string>{};
}

std::string TCPStore::describe() const { return fmt::format("tcp://{}:{}", host_, port_); }

void TCPStore::do_set(const std::string& key, const std::vector<char>& data) {
  detail::Writer w;
  w.str(key);
  w.bytes(data.data(), data.size());
  const auto what = fmt::format("set('{}')", key);
  const auto r = client_->call(Op::Set, w.buffer(), Clock::now() + timeout_, what);
  if (r.status != Status::Ok || !r.payload.empty()) throw_unexpected(describe(), what, r);
}

namespace {
// Turns a TIMEOUT reply into a TimeoutError naming the keys, the elapsed time and the join count.
[[noreturn]] void throw_timeout(const std::string& where, const std::string& what,
                                const detail::TCPStoreClient::Response& r) {
  const auto info = detail::decode_timeout(r.payload);
  if (!info) throw BackendError(fmt::format("TCPStore {}: malformed timeout response to {}", where, what));
  std::string missing = quote_keys(info->missing);
  if (info->num_missing > info->missing.size())
    missing += fmt::format(" and {} more", info->num_missing - info->missing.size());
  const auto joined = info->world_size > 0 ? fmt::format("{} of {} workers joined", info->joined, info->world_size)
                                           : fmt::format("{} workers joined", info->joined);
  throw TimeoutError(fmt::format("TCPStore {}: {} timed out after {:.2f} s; missing {} ({})", where, what,
                                 std::chrono::duration<double>(info->elapsed).count(), missing, joined));
}

[[noreturn]] void throw_unexpected(const std::string& where, const std::string& what,
                                   const detail::TCPStoreClient::Response& r) {
  if (r.status == Status::Error) {
    detail::Reader reader(r.payload.data(), r.payload.size());
    std::string message;
    if (reader.str(message, 0, r.payload.size())) throw ValueError(fmt::format("TCPStore {}: {}", where, message));
  }
  throw BackendError(fmt::format("TCPStore {}: unexpected response to {}", where, what));
}
}  // namespace

std::vector<char> TCPStore::do_get(const std::string& key) {
  detail::Writer w;
  w.u64(static_cast<std::uint64_t>(timeout_.count()));
  w.str(key);
  const auto what = fmt::format("get('{}')", key);
  const auto r = client_->call(Op::Get, w.buffer(), Clock::now() + timeout_ + kReplySlack, what);
  if (r.status == Status::Timeout) throw_timeout(describe(), what, r);
  detail::Reader reader(r.payload.data(), r.payload.size());
  std::vector<char> value;
  if (r.status != Status::Ok || !reader.bytes(value, kMaxValueBytes) || !reader.at_end())
    throw_unexpected(describe(), what, r);
  return value;
}

void TCPStore::do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  detail::Writer w;
  w.u64(static_cast<std::uint64_t>(timeout.count()));
  w.u32(static_cast<std::uint32_t>(keys.size()));
  for (const auto& k : keys) w.str(k);
  if (w.buffer().size() > detail::kMaxRequestPayload)
    throw ValueError(fmt::format("TCPStore {}: wait for {} keys is a {} byte request, more than the limit of {}",
                                 describe(), keys.size(), w.buffer().size(), detail::kMaxRequestPayload));
  const auto what = fmt::format("wait for {}", quote_keys(keys));
  const auto r = client_->call(Op::Wait, w.buffer(), Clock::now() + timeout + kReplySlack, what);
  if (r.status == Status::Timeout) throw_timeout(describe(), what, r);
  if (r.status != Status::Ok || !r.payload.empty()) throw_unexpected(describe(), what, r);
}

std::int64_t TCPStore::do_add(const std::string& key, std::int64_t delta) {
  detail::Writer w;
  w.str(key);
  w.i64(delta);
  const auto what = fmt::format("add('{}', {})", key, delta);
  const auto r = client_->call(Op::Add, w.buffer(), Clock::now() + timeout_, what);
  detail::Reader reader(r.payload.data(), r.payload.size());
  std::int64_t value = 0;
  if (r.status != Status::Ok || !reader.i64(value) || !reader.at_end()) throw_unexpected(describe(), what, r);
  return value;
}

bool TCPStore::do_check(const std::vector<std::string>& keys) {
  detail::Writer w;
  w.u32(static_cast<std::uint32_t>(keys.size()));
  for (const auto& k : keys) w.str(k);
  if (w.buffer().size() > detail::kMaxRequestPayload)
    throw ValueError(fmt::format("TCPStore {}: check of {} keys is a {} byte request, more than the limit of {}",
                                 describe(), keys.size(), w.buffer().size(), detail::kMaxRequestPayload));
  const auto what = fmt::format("check({})", quote_keys(keys));
  const auto r = client_->call(Op::Check, w.buffer(), Clock::now() + timeout_, what);
  detail::Reader reader(r.payload.data(), r.payload.size());
  std::uint8_t all = 0;
  if (r.status != Status::Ok || !reader.u8(all) || !reader.at_end()) throw_unexpected(describe(), what, r);
  return all != 0;
}

std::int64_t TCPStore::num_joined() { return add(kJoinCountKey, 0); }

void TCPStore::wait_for_workers(std::chrono::milliseconds timeout) { await_join(*this, world_size_, timeout); }

}  // namespace idist::store
