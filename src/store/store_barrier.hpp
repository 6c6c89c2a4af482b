#pragma once
/// @file
/// A barrier over a rendezvous store: for rendezvous steps that must not use the backend's own
/// collectives (e.g. before a communicator exists, or while tearing one down).

#include <chrono>
#include <string>

#include "store/store.hpp"

namespace idist::store {

/// Blocks until `world_size` participants called store_barrier with the same `name`.
/// One-shot: each barrier needs its own name (e.g. "<group>/barrier/<generation>").
/// Uses the keys "<name>/arrived" (a counter) and "<name>/done".
/// @throws ValueError for world_size < 1; TimeoutError after `timeout`, saying "k of n ranks arrived at
///         barrier '<name>'".
void store_barrier(Store& store, const std::string& name, int world_size, std::chrono::milliseconds timeout);

}  // namespace idist::store
