#pragma once
// The TCPStore server's key-value state: the map and the GET / WAIT requests waiting for keys. No sockets and no
// timers: the sessions (tcp_store_session.hpp) hand it parsed requests and learn through WaitListener when a pending
// request can be answered, so the rules of the store can be tested without a network. Used on the server thread only
// (no lock).

#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "store/tcp_store_protocol.hpp"

namespace idist::store::detail {

/// Told by the state when a pending GET / WAIT can be answered. The state forgets the request before
/// calling it.
class WaitListener {
 public:
  /// Every key of the request is present now: reply KeyValueState::ok_reply().
  virtual void keys_present() = 0;

 protected:
  ~WaitListener() = default;
};

/// A GET or WAIT.
struct PendingWait {
  Op op = Op::Wait;
  std::string get_key;               ///< GET: the key whose value is returned
  std::vector<std::string> missing;  ///< keys still absent
  std::chrono::steady_clock::time_point start;
  WaitListener* listener = nullptr;  ///< the session; unset by cancel() before the session goes away
};

/// The store's data and its rules: reserved keys, decimal counters, waits.
class KeyValueState {
 public:
  using Clock = std::chrono::steady_clock;
  /// What an ADD answers: the counter's value, or the text of an ERROR reply.
  using Count = std::variant<std::int64_t, std::string>;

  /// `world_size` > 0 is published under kWorldSizeKey; <= 0: unknown.
  explicit KeyValueState(int world_size);

  /// Expected processes, 0 when unknown (what TIMEOUT replies report).
  std::uint32_t world_size() const noexcept { return world_size_ > 0 ? std::uint32_t(world_size_) : 0; }
  /// Processes that joined so far (the counter kJoinCountKey of store_join.hpp).
  std::uint32_t joined() const;

  /// SET; nullopt on success, else the text of the ERROR reply (a reserved key).
  std::optional<std::string> set(const std::string& key, std::vector<char> value);
  /// ADD of `delta` to the decimal counter `key` (absent: 0). A reserved key may only be read (delta 0),
  /// and reading one creates nothing.
  Count add(const std::string& key, std::int64_t delta);
  /// CHECK: whether every key is present.
  bool all_present(const std::vector<std::string>& keys) const;
  /// A GET (`keys` = its one key) or WAIT by `listener`: the request, already complete when its
  /// `missing` is empty (then it is not kept), else kept until the keys appear (listener->keys_present())
  /// or cancel().
  std::shared_ptr<PendingWait> wait(Op op, std::vector<std::string> keys, WaitListener* listener);
  /// Forgets a pending request (its timeout ran out, or its session closed). Idempotent.
  void cancel(const std::shared_ptr<PendingWait>& w);
  /// The OK payload of a complete request: the value for GET, empty for WAIT.
  Writer ok_reply(const PendingWait& w) const;
  /// The TIMEOUT payload of a request still missing keys at `now`.
  Writer timeout_reply(const PendingWait& w, Clock::time_point now) const;

 private:
  void store(const std::string& key, std::vector<char> value);  // sets, then notify(key)
  void notify(const std::string& key);                          // completes the waits for which `key` was the last

  int world_size_;
  std::unordered_map<std::string, std::vector<char>> data_;
  std::list<std::shared_ptr<PendingWait>> waiters_;
};

}  // namespace idist::store::detail
