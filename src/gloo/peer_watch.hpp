#pragma once
// PeerWatch: ends a gloo operation within about two seconds when a peer host stops answering on the
// network (a partition, a crashed or powered-off host), instead of at the operation's timeout.
//
// A dead peer process is seen at once (its host resets the connections); an unreachable host sends
// nothing at all, so a waiting operation would sit out its whole timeout. While an operation of a
// watched communicator has run for `delay`, the watch's thread probes the communicator's other hosts:
// one TCP connection attempt per host to the remote end of an existing gloo connection (a refusal
// proves the host is up; a slow or busy peer process still answers through its kernel). A host that
// answers none of `rounds` consecutive probes of `probe_timeout` each is lost: the watch calls the
// communicator's on_lost once, which shuts down the connections to that host's ranks, so that gloo
// fails the operation with an I/O error. Probes run only while an operation waits longer than `delay`,
// at most one round per `probe_timeout`.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gloo/pair_socket.hpp"

namespace idist::gloo_backend {

class PeerWatch {
 public:
  /// Timings of the watch (see the file's comment).
  struct Settings {
    std::chrono::milliseconds delay{200};          ///< an operation runs this long before its hosts are probed
    std::chrono::milliseconds probe_timeout{600};  ///< one probe round: the wait for every host's answer
    int rounds = 2;                                ///< consecutive unanswered rounds that make a host lost
  };

  /// Another host of a communicator.
  struct Host {
    Endpoint probe;              ///< where to probe: the remote end of one gloo connection to that host
    std::vector<int> positions;  ///< the communicator's ranks (context positions) on that host
    std::string described;       ///< "rank 2 (host idc2, 198.18.0.2), rank 3 (...)", for the message
  };

  /// One communicator as the watch sees it. Owned by the communicator; add() before its first
  /// operation, remove() before it is destroyed.
  struct Subject {
    std::vector<Host> hosts;
    /// Start of the running operation (steady_clock ticks), 0 while idle. Set by the thread that runs
    /// the operation; one gloo context runs one operation at a time.
    std::atomic<std::int64_t> busy_since{0};
    /// Called once, on the watch's thread, with the indices (into hosts) of the lost hosts.
    std::function<void(const std::vector<std::size_t>&)> on_lost;
  };

  /// The settings from IDIST_GLOO_PEER_WATCH: unset or "1"/"on" for the defaults, "0"/"off" for none
  /// (nullopt), or "DELAY_MS,PROBE_MS,ROUNDS".
  /// @throws ValueError naming the variable and its value when it is none of those.
  static std::optional<Settings> from_env();

  explicit PeerWatch(Settings settings);
  /// Stops the thread.
  ~PeerWatch();
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

  /// The timings in use.
  const Settings& settings() const noexcept { return settings_; }
  /// Watches `subject` (its hosts must not change afterwards); the thread starts with the first one.
  void add(Subject& subject);
  /// Stops watching `subject`; waits for an on_lost call in progress.
  void remove(Subject& subject);

 private:
  struct State {
    std::uint64_t id = 0;
    std::int64_t op = 0;        // busy_since of the operation the failures count for
    std::vector<int> failures;  // per host: consecutive unanswered rounds
    bool fired = false;
  };
  void run();

  const Settings settings_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::map<Subject*, State> subjects_;
  std::uint64_t next_id_ = 1;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace idist::gloo_backend
