// OneRankFirst: the designated rank runs a block before the others.
#include "idist/helpers.hpp"

#include <fmt/format.h>

namespace idist {

OneRankFirst::OneRankFirst(int rank, bool local) {
  ComputationModel& m = current_model();
  const int current = local ? m.local_rank() : m.rank();
  const int size = local ? m.nproc_per_node() : m.world_size();
  if (rank < 0 || rank >= size)
    throw ValueError(fmt::format("one_rank_first: rank should be between 0 and {}, but given {}", size - 1, rank));
  is_first_ = current == rank;
  uncaught_ = std::uncaught_exceptions();
  if (!is_first_) barrier();
}

OneRankFirst::~OneRankFirst() noexcept(false) {
  if (!is_first_) return;
  if (std::uncaught_exceptions() > uncaught_) {
    // The block threw: still release the others, but let the block's exception propagate.
    try {
      barrier();
    } catch (...) {
    }
    return;
  }
  barrier();
}

}  // namespace idist
