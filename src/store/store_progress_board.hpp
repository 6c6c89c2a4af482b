#pragma once
// The debug layer's progress board (core/debug/progress_board.hpp) over a rendezvous store: one key
// per group and rank, "idist/debug/seq/<group hash>/<rank>", holding the last started sequence number.
#include <memory>

#include "core/debug/progress_board.hpp"
#include "store/store.hpp"

namespace idist::store {

/// A board on `store`, which it does not keep alive: once the backend has released the store, the board
/// publishes nothing and reads nothing.
std::shared_ptr<core::debug::ProgressBoard> make_progress_board(std::weak_ptr<Store> store);

}  // namespace idist::store
