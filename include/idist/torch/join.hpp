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

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <torch/nn/module.h>

#include "idist/context.hpp"
#include "idist/detail/format.hpp"
#include "idist/error.hpp"
#include "idist/torch/auto_model.hpp"
#include "idist/torch/broadcast_coalesced.hpp"
#include "idist/torch/collectives.hpp"
#include "idist/torch/reducer.hpp"

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

/// One run of idist::join on one reducer: installs the indicator as the reducer's join tick and
/// removes it (restoring the divisor) when destroyed.
class JoinSession {
 public:
  /// @throws ValueError when another join is running on the same model.
  JoinSession(std::shared_ptr<Reducer> reducer, const JoinOptions& opts)
      : reducer_(std::move(reducer)), opts_(opts), rank_(get_rank()), world_size_(get_world_size()) {
    if (reducer_->has_join_tick())
      throw ValueError("join: a join is already running on this model (joins cannot be nested)");
    reducer_->set_join_tick([this] { return tick(); });
  }
  ~JoinSession() { reducer_->set_join_tick({}); }
  JoinSession(const JoinSession&) = delete;
  JoinSession& operator=(const JoinSession&) = delete;

  /// After this rank's loop returned: shadows the active ranks until none is left, then broadcasts
  /// the authoritative rank's parameters and buffers to every rank (states: the module's).
  /// @throws Error with throw_on_early_termination when some rank is still active.
  void shadow_until_all_joined(const torch::nn::Module& module) {
    bool last_joiner = true;
    for (;;) {
      const std::vector<int> active = indicator(false);
      if (active.empty()) break;
      if (opts_.throw_on_early_termination)
        throw Error(detail::format_message(
            "join: rank {} exhausted its inputs while rank(s) {} still had some (throw_on_early_termination); "
            "raising on every rank",
            rank_, list(active)));
      reducer_->shadow_backward(active.back());
      last_joiner = false;
    }
    // DDP's _find_common_rank: the highest rank among the last to join holds the final model.
    const int src = all_reduce(last_joiner ? rank_ : -1, ReduceOp::Max);
    std::vector<at::Tensor> states = module.parameters(true);
    for (const auto& b : module.buffers(true)) states.push_back(b);
    broadcast_coalesced(states, src);
  }

 private:
  /// The indicator all-reduce; returns the active ranks in ascending order.
  std::vector<int> indicator(bool active_here) {
    at::Tensor flags = at::zeros({world_size_}, at::kInt);
    if (active_here) flags[rank_].fill_(1);
    flags = idist::all_reduce(flags, ReduceOp::Sum);
    std::vector<int> active;
    const auto* f = flags.data_ptr<std::int32_t>();
    for (int r = 0; r < world_size_; ++r)
      if (f[r] != 0) active.push_back(r);
    return active;
  }

  /// The reducer's join tick: called at the start of each synchronised backward of this rank.
  Reducer::JoinTick tick() {
    const std::vector<int> active = indicator(true);
    if (opts_.throw_on_early_termination && int(active.size()) < world_size_) {
      std::vector<int> joined;
      for (int r = 0, k = 0; r < world_size_; ++r) {
        if (k < int(active.size()) && active[std::size_t(k)] == r)
          ++k;
        else
          joined.push_back(r);
      }
      throw Error(detail::format_message(
          "join: rank(s) {} exhausted their inputs (throw_on_early_termination); raising on every rank, here rank {}",
          list(joined), rank_));
    }
    return Reducer::JoinTick{opts_.divide_by_initial_world_size ? double(world_size_) : double(active.size()),
                             active.back()};
  }

  static std::string list(const std::vector<int>& ranks) {
    std::string s;
    for (int r : ranks) s += detail::format_message("{}{}", s.empty() ? "" : ", ", r);
    return s;
  }

  std::shared_ptr<Reducer> reducer_;
  JoinOptions opts_;
  int rank_;
  int world_size_;
};

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
  if (!opts.enable || get_world_size() == 1) {
    loop();
    return;
  }
  std::shared_ptr<detail::Reducer> reducer = detail::reducer_of(model);
  if (!reducer)
    throw ValueError(
        "join: the model was not prepared by idist::auto_model, so there are no gradient "
        "all-reduces to shadow; call idist::auto_model(model) first");
  const std::shared_ptr<torch::nn::Module> module = detail::module_of(model);
  detail::JoinSession session(reducer, opts);
  loop();
  session.shadow_until_all_joined(*module);
}

}  // namespace idist
