#pragma once
/// @file
/// The rendezvous key-value store interface of idist: set / get / wait (what Gloo's
/// `gloo::rendezvous::Store` asks of a store) plus an atomic counter (`add`) and a non-blocking presence
/// test (`check`), which idist's own barriers and counters need. Implementations: TCPStore
/// (tcp_store.hpp), FileStore (file_store.hpp) and PrefixStore (prefix_store.hpp), mirroring the stores
/// behind torch.distributed's init methods. Independent of Gloo, so that the nccl bootstrap builds
/// without it; the gloo backend hands a store to Gloo through src/gloo/gloo_store.hpp.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace idist::store {

/// Largest key any store accepts, in bytes.
inline constexpr std::size_t kMaxKeyBytes = 4096;
/// Largest value any store accepts, in bytes (64 MiB).
inline constexpr std::size_t kMaxValueBytes = std::size_t{64} << 20;

/// Rendezvous key-value store: set / get / wait plus add and check.
///
/// Semantics shared by every implementation:
/// - `set(key, value)` stores (or overwrites) a value; visible to every client once it returns.
/// - `get(key)` blocks until the key exists (at most timeout()) and returns its value.
/// - `wait(keys)` / `wait(keys, timeout)` block until every key exists.
/// - `add(key, delta)` atomically adds to a counter stored as decimal text (a missing key counts as 0)
///   and returns the new value; `get` on a counter returns that text (e.g. "3").
/// - `check(keys)` reports, without blocking, whether every key exists.
/// Keys are 1..kMaxKeyBytes bytes, values at most kMaxValueBytes bytes.
///
/// Errors: ValueError for an empty / oversized key or an oversized value; TimeoutError when a get / wait
/// runs past its timeout (naming the store, the missing keys and the elapsed time); BackendError when
/// the store cannot be reached or fails. All are idist::Error subclasses. Gloo's algorithms receive
/// them unchanged through the rendezvous.
class Store {
 public:
  virtual ~Store() = default;

  /// Stores (or overwrites) `data` under `key`.
  /// @throws ValueError for an empty / oversized key or an oversized value.
  virtual void set(const std::string& key, const std::vector<char>& data) = 0;

  /// Blocks until `key` exists (at most timeout()) and returns its value.
  /// @throws TimeoutError naming the key and the elapsed time.
  virtual std::vector<char> get(const std::string& key) = 0;

  /// Atomically adds `delta` to the counter `key` (created at 0) and returns the new value.
  /// @throws ValueError when the key holds a value that is not a decimal integer.
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;

  /// True when every key of `keys` exists. Never blocks on the keys (only on the transport).
  virtual bool check(const std::vector<std::string>& keys) = 0;

  /// Waits for `keys` with the store's default timeout().
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout()); }

  /// Waits until every key of `keys` exists.
  /// @throws TimeoutError after `timeout`, naming the missing keys and the elapsed time.
  virtual void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) = 0;

  /// The default timeout of get() and wait(keys), and the bound on every client call.
  virtual std::chrono::milliseconds timeout() const = 0;

  /// Where the store lives, for messages: "tcp://host:port", "file:///path", "prefix 'g1/' of ...".
  virtual std::string describe() const = 0;

  /// Leaving on an error: the destructor shall not wait for other clients to disconnect (they may be
  /// dead or stuck, and a rank that raised must exit promptly). No-op for stores without a server.
  virtual void leave_without_waiting() {}

  /// set() for text values.
  void set_string(const std::string& key, std::string_view value);
  /// get() returning text.
  std::string get_string(const std::string& key);
};

/// Throws ValueError unless 1 <= key.size() <= kMaxKeyBytes. `where` names the store (describe()).
void validate_key(const std::string& key, const std::string& where);
/// Throws ValueError unless value_size <= kMaxValueBytes.
void validate_value(const std::string& key, std::size_t value_size, const std::string& where);
/// Parses a counter value (decimal text); throws ValueError naming the key otherwise.
std::int64_t parse_counter(const std::string& key, const std::vector<char>& value, const std::string& where);
/// "'a', 'b', 'c'" (at most `limit` keys, then ", ... (N more)"), for messages.
std::string quote_keys(const std::vector<std::string>& keys, std::size_t limit = 8);

}  // namespace idist::store
