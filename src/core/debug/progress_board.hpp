#pragma once
// Where each rank publishes the sequence number of the last collective it started on each group, so
// that a timeout can name the ranks that never reached it (IDIST_DISTRIBUTED_DEBUG=INFO and above).
// The debug layer sees only this interface; a backend with a store shared by the ranks (gloo, nccl)
// implements it over that store (store/store_progress_board.hpp), so core depends on no store.
#include <cstdint>
#include <optional>

namespace idist::core::debug {

/// A board shared by the ranks. Thread-safe.
class ProgressBoard {
 public:
  virtual ~ProgressBoard() = default;
  /// Publishes that world rank `rank` started sequence number `seq` on the group of hash `group`.
  /// @throws what the underlying store throws.
  virtual void publish(std::int64_t group, int rank, std::int64_t seq) = 0;
  /// What world rank `rank` published for the group of hash `group`; nullopt when it published
  /// nothing yet. @throws what the underlying store throws.
  virtual std::optional<std::int64_t> read(std::int64_t group, int rank) = 0;
};

}  // namespace idist::core::debug
