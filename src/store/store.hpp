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
#include <span>
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
/// Keys are 1..kMaxKeyBytes bytes, values at most max_value_bytes() (kMaxValueBytes unless the server
/// takes less).
///
/// The public calls are a non-virtual front door: they check the keys, the value size and the wait
/// timeout in one place (validate()), answer the trivial cases (no keys) and only then call the
/// implementation's private do_* functions, which may rely on valid arguments.
///
/// Errors: ValueError for an empty / oversized key, an oversized value or a negative wait timeout;
/// TimeoutError when a get / wait runs past its timeout (naming the store, the missing keys and the
/// elapsed time); BackendError when the store cannot be reached or fails. All are idist::Error
/// subclasses. Gloo's algorithms receive them unchanged through the rendezvous.
class Store {
 public:
  virtual ~Store() = default;

  /// Stores (or overwrites) `data` under `key`.
  /// @throws ValueError for an empty / oversized key or an oversized value.
  void set(const std::string& key, const std::vector<char>& data);

  /// Blocks until `key` exists (at most timeout()) and returns its value.
  /// @throws ValueError for an empty / oversized key; TimeoutError naming the key and the elapsed time.
  std::vector<char> get(const std::string& key);

  /// Atomically adds `delta` to the counter `key` (created at 0) and returns the new value.
  /// @throws ValueError for an empty / oversized key, or when the key holds a value that is not a decimal
  ///         integer.
  std::int64_t add(const std::string& key, std::int64_t delta);

  /// True when every key of `keys` exists (true for no keys). Never blocks on the keys (only on the
  /// transport).
  /// @throws ValueError for an empty / oversized key.
  bool check(const std::vector<std::string>& keys);

  /// Waits for `keys` with the store's default timeout().
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout()); }

  /// Waits until every key of `keys` exists (returns at once for no keys).
  /// @throws ValueError for an empty / oversized key or a negative timeout; TimeoutError after
  ///         `timeout`, naming the missing keys and the elapsed time.
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);

  /// The default timeout of get() and wait(keys), and the bound on every client call.
  virtual std::chrono::milliseconds timeout() const = 0;

  /// Where the store lives, for messages: "tcp://host:port", "file:///path", "prefix 'g1/' of ...".
  virtual std::string describe() const = 0;

  /// Leaving on an error: the destructor shall not wait for other clients to disconnect (they may be
  /// dead or stuck, and a rank that raised must exit promptly). No-op for stores without a server.
  virtual void leave_without_waiting() {}

  /// Largest value set() takes: kMaxValueBytes, or less where the server takes less.
  virtual std::size_t max_value_bytes() const { return kMaxValueBytes; }

  /// set() for text values.
  void set_string(const std::string& key, std::string_view value);
  /// get() returning text.
  std::string get_string(const std::string& key);

 private:
  // The one check of a call's keys (and of set's value size): ValueError naming the store and the key.
  void validate(std::span<const std::string> keys, std::size_t value_size = 0) const;

  // The implementation, called with valid keys (at least one for check / wait), a value of at most
  // max_value_bytes() and a timeout >= 0.
  virtual void do_set(const std::string& key, const std::vector<char>& data) = 0;
  virtual std::vector<char> do_get(const std::string& key) = 0;
  virtual std::int64_t do_add(const std::string& key, std::int64_t delta) = 0;
  virtual bool do_check(const std::vector<std::string>& keys) = 0;
  virtual void do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
};

/// Parses a counter value (decimal text); throws ValueError naming the key otherwise.
std::int64_t parse_counter(const std::string& key, const std::vector<char>& value, const std::string& where);
/// "'a', 'b', 'c'" (at most `limit` keys, then ", ... (N more)"), for messages.
std::string quote_keys(const std::vector<std::string>& keys, std::size_t limit = 8);

}  // namespace idist::store
