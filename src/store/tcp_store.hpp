#pragma once
/// @file
/// TCPStore: the key-value store behind the "env://" and "tcp://host:port" init methods. Rank 0 serves
/// it (an Asio server thread inside the TCPStore object); every rank, rank 0 included, is a client over
/// TCP. The wire protocol is documented at the top of tcp_store_protocol.hpp.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "store/store.hpp"

namespace idist::store {

namespace detail {
class TCPStoreServer;
class TCPStoreClient;
}  // namespace detail

/// Who may use a TCPStore, where its server listens and who this client is. All optional.
struct TCPStoreOptions {
  /// Per-job secret. The server admits only clients whose handshake carries the same token; every client
  /// sends its own. Empty on the server: no token is required (any process that reaches the port may use
  /// the store, as before tokens existed). open_store() takes it from IDIST_STORE_TOKEN, which spawn /
  /// Parallel set for their workers.
  std::string token;
  /// Addresses the server listens on. Empty: the loopback address `host` names when `host` is a loopback
  /// address, else every interface. open_store() passes rendezvous::store_bind_addresses().
  std::vector<std::string> bind_addresses;
  /// This process's rank, claimed when it joins (store_join.hpp) so that a rank claimed by two processes
  /// is reported at once by both of them and by the join wait; -1: unknown (no check).
  int rank = -1;
  /// A client (not only the server) waits in its constructor until every worker joined, so that a rank
  /// claimed twice is reported on every rank at once rather than as a later timeout. open_store() sets it.
  bool clients_wait_for_workers = false;
};

/// Key-value store over TCP, served by rank 0 (`is_server`) at host:port; others connect.
/// Mirrors torch.distributed.TCPStore as used by ignite's "env://" / "tcp://" init methods.
///
/// - Every client call honours `timeout`, including the first connect: a client retries connecting until
///   the deadline, so the server may start later than its clients.
/// - Every client joins once connected (store_join.hpp: store operations only, as on torchrun's agent
///   store). With `wait_for_workers` (default), the server's constructor waits until `world_size` clients
///   joined; every TimeoutError of a wait says "k of n workers joined" so that missing ranks are visible.
/// - A malformed or oversized request closes that client's connection only; the server keeps serving the
///   others. Connections without a handshake are closed after a few seconds; memory and the number of
///   connections are capped (tcp_store_protocol.hpp). Keys under "idist/store/" are the server's own.
/// - Shutdown: the server outlives the clients' last requests. The serving object's destructor first
///   closes its own client connection, then waits (at most `timeout`) until every other client has
///   disconnected — a client disconnects when its TCPStore is destroyed or its process exits — and only
///   then stops and joins the server thread. No barrier is needed before destruction.
/// - Thread safe: calls from several threads are serialized on the one connection.
class TCPStore final : public Store {
 public:
  /// Connects to (and, when `is_server`, first starts serving) the store at host:port.
  /// @param host address or name of the server; the server itself listens on every interface.
  /// @param port TCP port; with `is_server`, 0 picks a free port (read it back with port()).
  /// @param is_server true on exactly one rank (rank 0).
  /// @param world_size number of clients expected (all ranks, the server's included); <= 0: unknown,
  ///        no join wait and no "k of n" in messages.
  /// @param timeout bound on connecting, on the join wait and on every later call (default of get / wait).
  /// @param wait_for_workers with `is_server` and world_size > 0: wait in the constructor until every
  ///        worker joined.
  /// @param options token, listening addresses and this client's rank (see TCPStoreOptions).
  /// @throws ValueError for a bad port / timeout, when the server expects another world_size (two jobs on
  ///         one port), or when this rank (or, on the server, any rank) was claimed by two processes;
  ///         BackendError when the port cannot be bound or the server refuses this client's token;
  ///         TimeoutError when the server cannot be reached or workers do not join within `timeout`.
  TCPStore(std::string host, int port, bool is_server, int world_size, std::chrono::milliseconds timeout,
           bool wait_for_workers = true, TCPStoreOptions options = {});
  ~TCPStore() override;
  TCPStore(const TCPStore&) = delete;
  TCPStore& operator=(const TCPStore&) = delete;

  std::chrono::milliseconds timeout() const override { return timeout_; }
  std::string describe() const override;
  /// The server (rank 0) closes at once in the destructor instead of waiting up to timeout() for the
  /// other ranks to disconnect.
  void leave_without_waiting() override { wait_on_close_ = false; }

  /// The server's host as given.
  const std::string& host() const { return host_; }
  /// The server's port (the bound one when constructed with port 0).
  int port() const { return port_; }
  /// The number of workers given to the constructor (<= 0: unknown).
  int world_size() const { return world_size_; }
  /// True on the serving rank.
  bool is_server() const { return server_ != nullptr; }
  /// The server's listening addresses ("::" for every interface); empty on other ranks.
  std::vector<std::string> server_addresses() const;
  /// Number of clients that joined so far (the "k" of "k of n workers joined").
  std::int64_t num_joined();
  /// Blocks until `world_size` clients joined.
  /// @throws TimeoutError "k of n workers joined" after `timeout`; ValueError when a rank was claimed twice.
  void wait_for_workers(std::chrono::milliseconds timeout);

 private:
  void do_set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> do_get(const std::string& key) override;
  std::int64_t do_add(const std::string& key, std::int64_t delta) override;
  bool do_check(const std::vector<std::string>& keys) override;
  void do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;

  std::string host_;
  int port_;
  int world_size_;
  std::chrono::milliseconds timeout_;
  bool wait_on_close_ = true;                       // false once leave_without_waiting() was called
  std::unique_ptr<detail::TCPStoreServer> server_;  // destroyed after client_ (declared first)
  std::unique_ptr<detail::TCPStoreClient> client_;
};

}  // namespace idist::store
