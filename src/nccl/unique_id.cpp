#include "nccl/unique_id.hpp"

#include <nccl.h>

#include <cstring>

#include <fmt/format.h>

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
    throw TimeoutError(
        fmt::format("nccl: rank {} waited {} ms for the unique id of the {} communicator (key '{}') from "
                    "rank {}, which never set it: {}",
                    my_rank, timeout.count(), scope, key, root_rank, e.what()));
  }
  if (value.size() != kUniqueIdBytes)
    throw BackendError(
        fmt::format("nccl: key '{}' holds {} bytes, expected an ncclUniqueId of {} (is another job using "
                    "the same rendezvous address?)",
                    key, value.size(), kUniqueIdBytes));
  UniqueIdBytes id;
  std::memcpy(id.data(), value.data(), kUniqueIdBytes);
  return id;
}

}  // namespace idist::nccl_backend
