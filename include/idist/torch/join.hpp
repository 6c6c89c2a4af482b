#pragma once
/// @file
/// idist::join: training with a different number of batches on each rank (uneven inputs) without
/// hanging. Mirrors torch.distributed.algorithms.Join with DistributedDataParallel as the joinable
/// (its _DDPJoinHook), for a model prepared by idist::auto_model.
///
/// Protocol (every collective below is issued in the same order on every rank):
/// - while a rank runs its loop, each synchronised backward of the model starts with the join
///   indicator: an all-reduce (SUM) of an int32 vector of world-size entries in which each active
///   rank sets its own entry to 1. Every active rank so learns how many and which ranks are still
///   active; the gradients are divided by the initial world size or by that count, and the buffers
///   broadcast after the backward (broadcast_buffers) come from the highest active rank;
/// - a rank whose loop has returned has joined: it answers the indicator with zeros and, while some
///   rank is active, shadows each of their backwards (Reducer::shadow_backward: zero-filled bucket
///   all-reduces in bucket order, the used-parameter map with find_unused_parameters, the buffer
///   broadcast);
/// - once the indicator shows no active rank, the ranks that joined last (those that never shadowed)
///   are candidates and the highest of them is the authoritative rank (an all-reduce MAX): its
///   parameters and buffers are broadcast to every rank (DDP's _sync_final_model).
/// With throw_on_early_termination, the first indicator that shows a joined rank makes every rank
/// raise idist::Error instead: active ranks from their backward, the joined ranks from join().
///
/// Limits (torch's as well): inside the loop, only the model's synchronised backwards are shadowed, so
/// the loop must issue no other collective after some rank may have joined (e.g. an all_reduce of
/// the loss each step, or SyncBatchNorm's statistics); gather metrics after join() returns. A joined
/// rank waits in the indicator all-reduce until the next synchronised backward of the others, which
/// must come within the timeout given to initialize() (long no_sync() stretches count).

#include <functional>
#include <memory>
#include <type_traits>

#include <torch/nn/module.h>

#include "idist/torch/auto_model.hpp"

namespace idist {

/// Options of idist::join (the arguments of torch.distributed.algorithms.Join and DDP's join()).
struct JoinOptions {
  /// Divide gradients by the initial world size (true, DDP's default) or by the number of ranks
  /// still active in that iteration (false: joined ranks no longer dilute the average).
  bool divide_by_initial_world_size = true;
  /// Run the join protocol; false runs the loop alone (then uneven inputs hang, as without join).
  bool enable = true;
  /// Raise idist::Error on every rank as soon as one rank has run out of data, instead of
  /// shadowing it (torch's throw_on_early_termination).
  bool throw_on_early_termination = false;
};

namespace detail {

/// idist::join on `module`: runs `loop`, then shadows the ranks still active (see join()).
void run_join(const std::shared_ptr<torch::nn::Module>& module, const std::function<void()>& loop,
              const JoinOptions& opts);

}  // namespace detail

/// Runs `loop` (this rank's whole training loop over its own, possibly shorter, data) so that ranks
/// with different numbers of batches neither hang nor diverge: a rank whose loop returns early
/// shadows the gradient all-reduces of the others until every rank's loop has returned; then every
/// rank receives the parameters and buffers of the highest rank among the last to finish. See the
/// file comment for the protocol and its limits. Mirrors
/// `with torch.distributed.algorithms.Join([ddp_model], ...): loop()`:
///
///     auto model = idist::auto_model(net);
///     idist::join(model, [&] {
///       for (auto& batch : my_loader) { ... model->forward ... loss.backward(); optimizer.step(); }
///     }, {.divide_by_initial_world_size = true});
///
/// Every rank must call it. With world size 1 or enable = false it only runs the loop. When `loop`
/// throws, the exception propagates at once (nothing is shadowed), as in torch.
/// @throws ValueError when the world size is > 1 and the model did not go through auto_model, or
///         when a join already runs on it; idist::Error with throw_on_early_termination on every
///         rank once one rank has run out of data; what `loop` throws.
template <detail::ModelHandle Model, class Loop>
requires std::is_invocable_v<Loop&>
void join(const Model& model, Loop&& loop, const JoinOptions& opts = {}) {
  detail::run_join(
      detail::module_of(model), [&] { loop(); }, opts);
}

}  // namespace idist
