#include "nccl/unique_id.hpp"

#include <nccl.h>

#include <cstring>

#include "idist/error.hpp"

namespace idist::nccl_backend {

static_assert(sizeof(ncclUniqueId) == kUniqueIdBytes, "NCCL_UNIQUE_ID_BYTES changed");

std::string unique_id_key(std::string_view scope) { return "idist/nccl/" + std::string(scope) + "/unique_id"; }

std::string world_scope() { return "world"; }

std::string group_scope(std::span<const int> ranks) {
  std::string s = "group/";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ranks[i]);
  }
  return s;
}

UniqueIdBytes exchange_unique_id(KeyValueStore& store, std::string_view scope, int my_rank, int root_rank,
                                 const std::function<UniqueIdBytes()>& generate, std::chrono::milliseconds timeout) {
  const std::string key = unique_id_key(scope);
  if (my_rank == root_rank) {
    const UniqueIdBytes id = generate();
    store.set(key, std::vector<char>(id.begin(), id.end()));
    return id;
  }
  std::vector<char> value;
  try {
    value = store.wait_get(key, timeout);
  } catch (const TimeoutError& e) {
    throw TimeoutError("nccl: rank " + std::to_string(my_rank) + " waited " + std::to_string(timeout.count()) +
                       " ms for the unique id of the " + std::string(scope) + " communicator (key '" + key +
                       "') from rank " + std::to_string(root_rank) + ", which never set it: " + e.what());
  }
  if (value.size() != kUniqueIdBytes)
    throw BackendError("nccl: key '" + key + "' holds " + std::to_string(value.size()) + " bytes, expected an ncclUniqueId of " +
                       std::to_string(kUniqueIdBytes) + " (is another job using the same rendezvous address?)");
  UniqueIdBytes id;
  std::memcpy(id.data(), value.data(), kUniqueIdBytes);
  return id;
}

}  // namespace idist::nccl_backend
