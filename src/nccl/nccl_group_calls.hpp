#pragma once
// Several NCCL calls of one operation launched together: between ncclGroupStart and ncclGroupEnd.
#include <nccl.h>

#include "nccl/op.hpp"

namespace idist::nccl_backend {

/// Runs `queue()` (NCCL calls through o.nccl_queued) inside one NCCL group; ends the group when
/// `queue` throws.
template <class Queue>
void in_group(Op& o, Queue queue) {
  o.nccl_queued(ncclGroupStart());
  try {
    queue();
  } catch (...) {
    (void)ncclGroupEnd();
    throw;
  }
  o.nccl(ncclGroupEnd());
}

}  // namespace idist::nccl_backend
