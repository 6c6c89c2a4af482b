#pragma once
// How many LibTorch intra-op threads each rank uses.
#include <optional>

namespace fashion_mnist {

/// Number of CPU cores this process may run on (sched_getaffinity), at least 1.
int available_cores();

/// The intra-op thread count for one of `ranks_on_node` ranks sharing this node: the available cores
/// divided among them, at least 1. std::nullopt when the user set OMP_NUM_THREADS (LibTorch then
/// follows it). Oversubscribing the cores costs a lot: on 2 cores, two ranks with two threads each
/// train about 5x slower than with one thread each.
std::optional<int> default_intra_op_threads(int ranks_on_node);

}  // namespace fashion_mnist
