#include "store/store_barrier.hpp"

#include <fmt/format.h>

#include "idist/error.hpp"

namespace idist::store {

void store_barrier(Store& store, const std::string& name, int world_size, std::chrono::milliseconds timeout) {
  if (world_size < 1)
    throw ValueError(fmt::format("store_barrier('{}'): world_size should be >= 1, got {}", name, world_size));
  const auto arrived_key = name + "/arrived";
  const auto done_key = name + "/done";
  // The last to arrive releases everyone: a single key to wait on instead of polling the counter.
  if (store.add(arrived_key, 1) >= world_size) store.set_string(done_key, "1");
  try {
    store.wait({done_key}, timeout);
  } catch (const TimeoutError& e) {
    std::int64_t arrived = -1;
    try {
      arrived = store.add(arrived_key, 0);
    } catch (const Error&) {
    }
    throw TimeoutError(fmt::format("{} of {} ranks arrived at barrier '{}' of {} within {} ms ({})",
                                   arrived < 0 ? std::string("?") : fmt::to_string(arrived), world_size, name,
                                   store.describe(), timeout.count(), e.what()));
  }
}

}  // namespace idist::store
