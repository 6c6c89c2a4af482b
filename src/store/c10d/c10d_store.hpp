#pragma once
/// @file
/// C10dStore: idist's Store interface on a PyTorch c10d TCPStore server, such as the store torchrun's
/// agent serves to its workers (TORCHELASTIC_USE_AGENT_STORE=True). A client only: idist never serves
/// this protocol. Speaks both wire protocols (protocol.hpp): version 1 (torch 1.x, 2.0) and version 2
/// (torch 2.1 and later), chosen by IDIST_C10D_STORE_PROTOCOL or detected (probe.hpp).

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "store/c10d/connection.hpp"
#include "store/c10d/protocol.hpp"
#include "store/store.hpp"

namespace idist::store {

/// How a C10dStore names and talks to its server.
struct C10dStoreOptions {
  /// Names the store in messages before its address ("torchrun agent store").
  std::string label = "c10d TCPStore";
  /// The protocol; nullopt: IDIST_C10D_STORE_PROTOCOL when set, else detected.
  std::optional<c10d::Version> version;
  /// Opens each connection; empty: TCP to host:port, retried until the call's deadline. Tests and the
  /// fuzz target (tests/fuzz) give a scripted peer here.
  c10d::Connector connect = {};
};

/// Client of a c10d TCPStore at host:port, mapped onto idist's Store semantics:
/// - set: SET, then a CHECK of the key on the same connection, so that the value is stored (and a dead
///   server noticed) when set() returns; values are at most c10d::kMaxValueBytes (8 MiB, what torch
///   2.x's libuv server takes: ValueError past it);
/// - get: WAIT for the key (bounded by timeout()), then GET (c10d's server closes the connection on a
///   GET of a missing key);
/// - add: ADD (values are decimal text, as idist's counters); a server that drops the connection because
///   the key holds a non-integer gives ValueError;
/// - check: CHECK; wait: WAIT (both in slices of c10d::kMaxKeysPerRequest keys), bounded on this side (the wire has no
/// timeout): past the timeout the
///   connection is dropped, which the server treats as a cancelled wait, and TimeoutError names the keys
///   still missing (checked on a fresh connection).
/// Every connection starts with the protocol's hello (protocol.hpp: GETNUMKEYS, after VALIDATE in version
/// 2) and its reply, so a wrong IDIST_C10D_STORE_PROTOCOL fails without sending requests the server would
/// misread. Keys are sent as c10d's client sends them ("/" + key), so torch's clients of the same server
/// see the same keys. Every call, connecting included, ends by its deadline (timeout(), or wait's timeout); any
/// failure drops the connection and the next call reconnects. Thread safe (calls are serialized).
class C10dStore final : public Store {
 public:
  /// Connects to host:port (retrying until `timeout`: the server may start later) and settles the
  /// protocol.
  /// @throws ValueError for an empty host, a port outside 1..65535, a non-positive timeout or a bad
  ///         IDIST_C10D_STORE_PROTOCOL; TimeoutError when the server cannot be reached, or its protocol
  ///         not told, within `timeout`; BackendError when it is no c10d TCPStore.
  C10dStore(std::string host, int port, std::chrono::milliseconds timeout, C10dStoreOptions options = {});
  ~C10dStore() override;
  C10dStore(const C10dStore&) = delete;
  C10dStore& operator=(const C10dStore&) = delete;

  std::chrono::milliseconds timeout() const override { return timeout_; }
  /// "<label> tcp://host:port".
  std::string describe() const override;
  /// c10d::kMaxValueBytes: what torch 2.x's libuv server takes.
  std::size_t max_value_bytes() const override { return c10d::kMaxValueBytes; }

  /// The protocol in use.
  c10d::Version version() const { return version_; }

 private:
  using Clock = c10d::Clock;

  void do_set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> do_get(const std::string& key) override;
  std::int64_t do_add(const std::string& key, std::int64_t delta) override;
  bool do_check(const std::vector<std::string>& keys) override;
  void do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  struct Call;  // one call's deadline, start and name

  std::unique_ptr<c10d::Connection> connect_raw(Clock::time_point deadline, Clock::time_point start);
  std::unique_ptr<c10d::Connection> connect_ready(Clock::time_point deadline, Clock::time_point start);
  c10d::Connection& connection(const Call& call);
  void send(const Call& call, const std::vector<char>& request);
  void receive(const Call& call, void* out, std::size_t n);
  std::vector<char> receive_value(const Call& call);
  bool check_locked(const Call& call, const std::vector<std::string>& keys);
  std::vector<std::string> missing_keys(const std::vector<std::string>& keys);
  [[noreturn]] void fail(const Call& call, c10d::IoStatus status, std::string detail);

  std::string host_;
  int port_;
  std::chrono::milliseconds timeout_;
  std::string label_;
  c10d::Connector connect_;
  c10d::Version version_ = c10d::Version::V1;
  std::unique_ptr<c10d::Connection> conn_;
  std::mutex mutex_;
};

}  // namespace idist::store
