#pragma once
// Exchange of an ncclUniqueId through a key-value store: the root rank generates the id and sets
// it, every other rank waits for the key. Pure (no device): tested with threads and processes.
#include <array>
#include <chrono>
#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace idist::nccl_backend {

/// The two store operations the exchange needs. Implemented over idist's rendezvous store, and by
/// the tests over an in-memory map.
class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  /// Sets `key` to `value` (visible to every rank).
  virtual void set(const std::string& key, const std::vector<char>& value) = 0;
  /// Waits until `key` exists, at most `timeout`, and returns its value.
  /// @throws TimeoutError when the key does not appear in time.
  virtual std::vector<char> wait_get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  /// Leaving on an error: the store's server (rank 0) shall not wait for the other ranks to disconnect.
  virtual void leave_without_waiting() {}
};

/// Size of an ncclUniqueId (NCCL_UNIQUE_ID_BYTES; checked against nccl.h in unique_id.cpp).
inline constexpr std::size_t kUniqueIdBytes = 128;
/// The raw bytes of an ncclUniqueId.
using UniqueIdBytes = std::array<char, kUniqueIdBytes>;

/// Store key of the unique id of communicator `scope`: "idist/nccl/<scope>/unique_id".
std::string unique_id_key(std::string_view scope);

/// Scope of the world communicator: "world".
std::string world_scope();

/// Scope of the communicator of a group made from a fresh unique id (NCCL < 2.18, or
/// IDIST_NCCL_NO_SPLIT=1): "group/<r0>,<r1>,...", ranks ascending as given.
std::string group_scope(std::span<const int> ranks);

/// Gives every rank of a communicator the same unique id. The root calls `generate` (ncclGetUniqueId)
/// and sets the key of `scope`; the others wait for it at most `timeout`.
/// @param my_rank, root_rank world ranks, for messages.
/// @throws TimeoutError naming this rank, the root, the key and the timeout when the id does not
///         arrive; BackendError when the stored value is not kUniqueIdBytes long.
UniqueIdBytes exchange_unique_id(KeyValueStore& store, std::string_view scope, int my_rank, int root_rank,
                                 const std::function<UniqueIdBytes()>& generate, std::chrono::milliseconds timeout);

}  // namespace idist::nccl_backend
