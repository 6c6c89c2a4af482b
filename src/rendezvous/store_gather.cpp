#include "rendezvous/store_gather.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "idist/error.hpp"

namespace idist::rendezvous {

std::string gather_and_publish(store::Store& store, const std::string& prefix, int rank, int world_size,
                               const std::string& mine, const std::string& what, std::chrono::milliseconds timeout,
                               const std::function<std::string(const std::vector<std::string>&)>& combine) {
  const auto key_of = [&](int r) { return fmt::format("{}{}", prefix, r); };
  const std::string result_key = prefix + "result";
  store.set_string(key_of(rank), mine);
  if (rank == 0) {
    std::vector<std::string> keys;
    for (int r = 0; r < world_size; ++r) keys.push_back(key_of(r));
    try {
      store.wait(keys, timeout);
    } catch (const TimeoutError& e) {
      std::vector<int> missing;
      for (int r = 0; r < world_size && missing.size() < 16; ++r)
        if (!store.check({key_of(r)})) missing.push_back(r);
      throw TimeoutError(
          fmt::format("rendezvous: ranks [{}] of {} did not publish {} within {} ms (are they "
                      "running?): {}",
                      fmt::join(missing, ", "), world_size, what, timeout.count(), e.what()));
    }
    std::vector<std::string> values;
    values.reserve(std::size_t(world_size));
    for (int r = 0; r < world_size; ++r) values.push_back(store.get_string(key_of(r)));
    store.set_string(result_key, combine(values));
  }
  store.wait({result_key}, timeout);
  std::string result = store.get_string(result_key);
  // Rank 0's process often hosts the store, and a rank may raise as soon as it reads the result (a
  // record every rank reports as an error): rank 0 returns only once every rank has read it, so
  // that its exit cannot take the store from a rank still reading. A rank that never reads fails on
  // its own; rank 0 then goes on after `timeout`.
  if (store.add(prefix + "read", 1) >= world_size) store.set_string(prefix + "all_read", "");
  if (rank == 0) {
    try {
      store.wait({prefix + "all_read"}, timeout);
    } catch (const TimeoutError&) {
    }
  }
  return result;
}

}  // namespace idist::rendezvous
