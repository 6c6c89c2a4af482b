#include "store/c10d/c10d_store.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "idist/error.hpp"
#include "launch/settings.hpp"
#include "store/c10d/probe.hpp"

namespace idist::store {

using c10d::IoStatus;

namespace {
double seconds_since(c10d::Clock::time_point start) {
  return std::chrono::duration<double>(c10d::Clock::now() - start).count();
}

// Keys listed by a wait's TimeoutError are checked one by one on a fresh connection within this bound.
constexpr std::chrono::milliseconds kMissingKeysBound{2000};
constexpr std::size_t kMissingKeysListed = 16;
}  // namespace

struct C10dStore::Call {
  Clock::time_point start;
  Clock::time_point deadline;
  std::string what;
};

C10dStore::C10dStore(std::string host, int port, std::chrono::milliseconds timeout, C10dStoreOptions options)
    : host_(std::move(host)),
      port_(port),
      timeout_(timeout),
      label_(std::move(options.label)),
      connect_(std::move(options.connect)) {
  if (host_.empty()) throw ValueError(fmt::format("{}: host should be a host name or address, got ''", label_));
  if (port_ < 1 || port_ > 65535)
    throw ValueError(fmt::format("{}: port should be in [1, 65535], got {}", label_, port_));
  if (timeout_.count() <= 0)
    throw ValueError(fmt::format("{}: timeout should be positive, got {} ms", describe(), timeout_.count()));
  auto version = options.version;
  if (!version) version = c10d::parse_version_override(launch::c10d_store_protocol());
  const auto start = Clock::now();
  const auto deadline = start + timeout_;
  if (version) {
    version_ = *version;
    conn_ = connect_ready(deadline, start);
    return;
  }
  auto probed = c10d::probe_version([&](Clock::time_point d) { return connect_raw(d, start); }, deadline, describe());
  version_ = probed.version;
  conn_ = std::move(probed.connection);
}

C10dStore::~C10dStore() = default;

std::string C10dStore::describe() const { return fmt::format("{} tcp://{}:{}", label_, host_, port_); }

// Retries refused or failed attempts (the server may not listen yet) with a growing pause.
std::unique_ptr<c10d::Connection> C10dStore::connect_raw(Clock::time_point deadline, Clock::time_point start) {
  if (connect_) return connect_(deadline);
  auto conn = std::make_unique<c10d::Connection>();
  auto pause = std::chrono::milliseconds(10);
  for (;;) {
    const auto status = conn->connect(host_, port_, deadline);
    if (status == IoStatus::Ok) return conn;
    if (status == IoStatus::TimedOut || Clock::now() + pause >= deadline) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
  }
  throw TimeoutError(
      fmt::format("{}: could not connect within {:.2f} s (last error: {}); is the server running (torchrun's agent, "
                  "MASTER_ADDR / MASTER_PORT)?",
                  describe(), seconds_since(start), conn->error()));
}

std::unique_ptr<c10d::Connection> C10dStore::connect_ready(Clock::time_point deadline, Clock::time_point start) {
  auto conn = connect_raw(deadline, start);
  const auto status = c10d::hello(*conn, version_, deadline);
  if (status == IoStatus::Ok) return conn;
  fail({start, deadline, fmt::format("the first request of protocol {}", c10d::version_name(version_))}, status,
       fmt::format("{}; torch 1.x and 2.0 speak protocol 1, torch 2.1 and later protocol 2: is "
                   "IDIST_C10D_STORE_PROTOCOL right?",
                   conn->error()));
}

c10d::Connection& C10dStore::connection(const Call& call) {
  if (!conn_ || !conn_->is_open()) conn_ = connect_ready(call.deadline, call.start);
  return *conn_;
}

void C10dStore::fail(const Call& call, IoStatus status, std::string detail) {
  conn_.reset();  // detail is a copy: it often names the connection's own error text
  if (status == IoStatus::TimedOut)
    throw TimeoutError(fmt::format("{}: {} got no reply within {:.2f} s ({})", describe(), call.what,
                                   seconds_since(call.start), detail));
  if (status == IoStatus::Closed)
    throw BackendError(fmt::format(
        "{}: the server closed the connection during {} after {:.2f} s ({}); torchrun's agent may have exited",
        describe(), call.what, seconds_since(call.start), detail));
  throw BackendError(
      fmt::format("{}: {} failed after {:.2f} s: {}", describe(), call.what, seconds_since(call.start), detail));
}

void C10dStore::send(const Call& call, const std::vector<char>& request) {
  auto& conn = connection(call);
  if (const auto status = conn.write(request, call.deadline); status != IoStatus::Ok) fail(call, status, conn.error());
}

void C10dStore::receive(const Call& call, void* out, std::size_t n) {
  auto& conn = connection(call);
  if (const auto status = conn.read(out, n, call.deadline); status != IoStatus::Ok) fail(call, status, conn.error());
}

std::vector<char> C10dStore::receive_value(const Call& call) {
  std::array<unsigned char, c10d::kIntBytes> length{};
  receive(call, length.data(), length.size());
  const auto n = c10d::decode_u64(length.data());
  if (n > kMaxValueBytes) {
    conn_.reset();
    throw BackendError(fmt::format("{}: the reply to {} announces {} bytes, more than the limit of {} bytes",
                                   describe(), call.what, n, kMaxValueBytes));
  }
  std::vector<char> value(n);
  if (n) receive(call, value.data(), n);
  return value;
}

bool C10dStore::check_locked(const Call& call, const std::vector<std::string>& keys) {
  if (keys.size() > c10d::kMaxKeysPerRequest) {  // in slices the servers take
    for (std::size_t i = 0; i < keys.size(); i += c10d::kMaxKeysPerRequest) {
      const auto end = std::min(keys.size(), i + c10d::kMaxKeysPerRequest);
      if (!check_locked(call, std::vector<std::string>(keys.begin() + i, keys.begin() + end))) return false;
    }
    return true;
  }
  send(call, c10d::encode_check(version_, keys));
  unsigned char reply = 0;
  receive(call, &reply, 1);
  if (reply == c10d::kCheckReady) return true;
  if (reply == c10d::kCheckNotReady) return false;
  conn_.reset();
  throw BackendError(fmt::format("{}: unexpected reply {} to {}", describe(), int(reply), call.what));
}

void C10dStore::do_set(const std::string& key, const std::vector<char>& data) {
  std::lock_guard lock(mutex_);
  const auto start = Clock::now();
  const Call call{start, start + timeout_, fmt::format("set('{}')", key)};
  send(call, c10d::encode_set(version_, key, data));
  // SET has no reply: the CHECK behind it returns once the server has stored the value.
  if (!check_locked(call, {key}))
    throw BackendError(fmt::format("{}: key '{}' is missing right after {}", describe(), key, call.what));
}

std::vector<char> C10dStore::do_get(const std::string& key) {
  do_wait({key}, timeout_);
  std::lock_guard lock(mutex_);
  const auto start = Clock::now();
  const Call call{start, start + timeout_, fmt::format("get('{}')", key)};
  send(call, c10d::encode_get(version_, key));
  return receive_value(call);
}

std::int64_t C10dStore::do_add(const std::string& key, std::int64_t delta) {
  std::lock_guard lock(mutex_);
  const auto start = Clock::now();
  const Call call{start, start + timeout_, fmt::format("add('{}', {})", key, delta)};
  try {
    send(call, c10d::encode_add(version_, key, delta));
    std::array<unsigned char, c10d::kIntBytes> reply{};
    receive(call, reply.data(), reply.size());
    return c10d::decode_i64(reply.data());
  } catch (const BackendError&) {
    // The server closes the connection when the value is no integer: say so if that is the cause.
    std::optional<std::vector<char>> value;
    try {
      const auto now = Clock::now();
      const Call look{now, now + std::min(timeout_, kMissingKeysBound), call.what};
      if (check_locked(look, {key})) {
        send(look, c10d::encode_get(version_, key));
        value = receive_value(look);
      }
    } catch (const Error&) {
    }
    if (value) parse_counter(key, *value, describe());  // ValueError for a value that is no integer
    throw;
  }
}

bool C10dStore::do_check(const std::vector<std::string>& keys) {
  std::lock_guard lock(mutex_);
  const auto start = Clock::now();
  return check_locked({start, start + timeout_, fmt::format("check({})", quote_keys(keys))}, keys);
}

std::vector<std::string> C10dStore::missing_keys(const std::vector<std::string>& keys) {
  std::vector<std::string> missing;
  const auto start = Clock::now();
  const Call call{start, start + std::min(timeout_, kMissingKeysBound), "listing the missing keys"};
  for (const auto& k : keys) {
    if (!check_locked(call, {k})) missing.push_back(k);
    if (missing.size() == kMissingKeysListed) break;
  }
  return missing;
}

void C10dStore::do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::lock_guard lock(mutex_);
  const auto start = Clock::now();
  const Call call{start, start + timeout, fmt::format("wait for {}", quote_keys(keys))};
  if (timeout.count() == 0) {  // a poll: WAIT's reply could not arrive before a deadline of now
    const Call poll{start, start + timeout_, call.what};
    if (check_locked(poll, keys)) return;
    throw TimeoutError(
        fmt::format("{}: {} timed out after 0 s; missing {}", describe(), call.what, quote_keys(missing_keys(keys))));
  }
  IoStatus status = IoStatus::Ok;
  std::string error;
  for (std::size_t i = 0; i < keys.size() && status == IoStatus::Ok; i += c10d::kMaxKeysPerRequest) {
    const auto end = std::min(keys.size(), i + c10d::kMaxKeysPerRequest);
    auto& conn = connection(call);
    status = conn.write(c10d::encode_wait(version_, std::vector<std::string>(keys.begin() + i, keys.begin() + end)),
                        call.deadline);
    unsigned char reply = 0;
    if (status == IoStatus::Ok) status = conn.read(&reply, 1, call.deadline);
    error = conn.error();
    if (status == IoStatus::Ok && reply != c10d::kWaitStopWaiting) {
      conn_.reset();
      throw BackendError(fmt::format("{}: unexpected reply {} to {}", describe(), int(reply), call.what));
    }
  }
  if (status == IoStatus::Ok) return;
  if (status != IoStatus::TimedOut) fail(call, status, error);
  // The connection is closed: the server forgets the wait. Name what is missing, best effort.
  conn_.reset();
  std::string missing;
  try {
    missing = quote_keys(missing_keys(keys));
  } catch (const Error& e) {
    missing = fmt::format("{} (could not check which: {})", quote_keys(keys), e.what());
  }
  throw TimeoutError(
      fmt::format("{}: {} timed out after {:.2f} s; missing {}", describe(), call.what, seconds_since(start), missing));
}

}  // namespace idist::store
