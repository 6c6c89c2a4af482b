#pragma once
// Optimizers whose save() runs on every rank during Checkpoint::save (all but LibTorch's own): a
// ZeroRedundancyOptimizer gathers its shards on the rank that writes the file, not on its own
// default (group rank 0), so that the saving rank's archive holds the whole state.
#include <torch/optim/optimizer.h>
#include <torch/serialize/output-archive.h>

namespace idist::checkpoint {

/// Runs `optimizer`'s save() into `archive` on this rank, for a checkpoint written by world rank
/// `saving_rank`: a ZeroRedundancyOptimizer consolidates on that rank's position in its group
/// (collective over the group); any other optimizer saves as it does.
/// @throws ValueError when `saving_rank` is not a member of the ZeroRedundancyOptimizer's group;
///         what the optimizer's save() throws.
void save_optimizer_for(torch::optim::Optimizer& optimizer, torch::serialize::OutputArchive& archive, int saving_rank);

}  // namespace idist::checkpoint
