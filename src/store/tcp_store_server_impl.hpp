#pragma once
// What the TCPStore server's sessions share: the Asio context, the configuration, the key-value state,
// the open sessions and the counters. One io_context on one thread owns the state, the sessions and the
// pending GET / WAIT requests, so no lock guards the data; only the counters (ServerStats), read by the
// owner during shutdown and by tests, are shared with other threads. Internal to the server's files.

#include <condition_variable>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <asio.hpp>

#include "store/reject_log.hpp"
#include "store/tcp_store_server.hpp"
#include "store/tcp_store_state.hpp"

namespace idist::store::detail {

class Session;

struct ServerImpl {
  ServerImpl(int port, int world_size, ServerConfig config);
  ~ServerImpl();

  void listen(const std::string& address, int port);
  void accept(asio::ip::tcp::acceptor& acceptor);
  // Closes the oldest connection still without a handshake; false when there is none.
  bool evict_unauthenticated();

  int num_connections_now() {
    std::lock_guard lock(mutex);
    return stats.connections;
  }
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
  // Counts a refused or closed connection and logs it (rate-limited).
  void refuse(const std::string& reason, const std::string& peer, const std::string& detail = {}) {
    rejects.note(reason, peer, detail);
    std::lock_guard lock(mutex);
    ++stats.refused;
  }

  asio::io_context io;  // first member: destroyed last, after everything that holds its objects
  std::list<asio::ip::tcp::acceptor> acceptors;
  std::vector<std::string> addresses;
  asio::steady_timer accept_retry{io};
  ServerConfig config;
  int port = 0;  // the bound port, read by other threads
  KeyValueState state;
  std::list<std::weak_ptr<Session>> sessions;  // in accept order: for eviction and shutdown
  RejectLog rejects;
  mutable std::mutex mutex;  // guards stats
  std::condition_variable cv;
  ServerStats stats;
  std::thread thread;
};

}  // namespace idist::store::detail
