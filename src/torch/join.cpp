// idist::join (idist/torch/join.hpp): the indicator all-reduce installed as the reducer's join tick,
// the shadow backwards of a rank that has joined, and the final broadcast of the authoritative model.
#include "idist/torch/join.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "idist/collectives.hpp"
#include "idist/context.hpp"
#include "idist/error.hpp"
#include "idist/torch/collectives.hpp"
#include "torch/broadcast_coalesced.hpp"
#include "torch/reducer.hpp"

namespace idist::detail {

namespace {

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
        throw Error(fmt::format(
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
      throw Error(fmt::format(
          "join: rank(s) {} exhausted their inputs (throw_on_early_termination); raising on every rank, here rank {}",
          list(joined), rank_));
    }
    return Reducer::JoinTick{opts_.divide_by_initial_world_size ? double(world_size_) : double(active.size()),
                             active.back()};
  }

  static std::string list(const std::vector<int>& ranks) {
    std::string s;
    for (int r : ranks) s += fmt::format("{}{}", s.empty() ? "" : ", ", r);
    return s;
  }

  std::shared_ptr<Reducer> reducer_;
  JoinOptions opts_;
  int rank_;
  int world_size_;
};

}  // namespace

void run_join(const std::shared_ptr<torch::nn::Module>& module, const std::function<void()>& loop,
              const JoinOptions& opts) {
  if (!opts.enable || get_world_size() == 1) {
    loop();
    return;
  }
  std::shared_ptr<Reducer> reducer = module ? find_reducer(module.get()) : nullptr;
  if (!reducer)
    throw ValueError(
        "join: the model was not prepared by idist::auto_model, so there are no gradient "
        "all-reduces to shadow; call idist::auto_model(model) first");
  JoinSession session(reducer, opts);
  loop();
  session.shadow_until_all_joined(*module);
}

}  // namespace idist::detail
