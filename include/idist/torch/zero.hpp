#pragma once
/// @file
/// ZeroRedundancyOptimizer: optimizer state sharded over the ranks (ZeRO stage 1), PyTorch's
/// torch.distributed.optim.ZeroRedundancyOptimizer for LibTorch. Compiled into idist_torch.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include "idist/group.hpp"
#include "idist/torch/comm_hook.hpp"

namespace torch::serialize {
class OutputArchive;
class InputArchive;
}  // namespace torch::serialize

namespace idist {

namespace detail {
class ZeroImpl;  // src/torch/zero/zero_impl.hpp
}

/// The owner of each parameter under PyTorch's partition rule (ZeroRedundancyOptimizer's
/// _partition_parameters): the parameters are taken by decreasing element count (ties in the
/// order given) and each goes to the rank whose total element count is smallest so far (ties to
/// the lowest rank). Every rank's total is then at most sum / `ranks` + the largest count.
/// @param numels element count of each parameter, in the optimizer's order.
/// @param ranks  number of ranks sharing the parameters (the group size).
/// @return the owning rank, in [0, ranks), of each parameter, in the order of `numels`.
/// @throws ValueError when `ranks` < 1 or a count is negative.
std::vector<int> zero_partition(std::span<const std::int64_t> numels, int ranks);

/// Options of ZeroRedundancyOptimizer (the keyword arguments of PyTorch's constructor that apply).
struct ZeroRedundancyOptimizerOptions {
  /// The ranks the optimizer state is sharded over (PyTorch's process_group); the world by default.
  /// Make it with idist::new_group() on every rank first (some backends create a group's
  /// communicator collectively over the world). Every member constructs the optimizer and calls
  /// step() alike; the rank of a member is its position in the group (ascending world ranks). The
  /// gradients must already agree over these ranks when step() runs (auto_model averages them over
  /// the world).
  Group group{};
  /// PyTorch's parameters_as_bucket_view. true (idist's default; PyTorch's is false): every
  /// trainable parameter becomes a view into one flat buffer (on the parameters' device, in their
  /// dtype) holding the parameters grouped by owner, so step() publishes the shards without
  /// copying parameters and with no extra memory but this rank's shard (the send buffer). The
  /// parameters keep their tensor objects (their storage changes, as `param.data = bucket_view`
  /// does in PyTorch): views taken from them before the construction do not follow. false: the
  /// parameters keep their storage, and step() copies through a staging buffer of the whole
  /// model's size (on the parameters' device too).
  bool parameters_as_bucket_view = true;
  /// PyTorch's overlap_with_ddp. true: the step runs inside the backward of a model wrapped by
  /// auto_model, through a hook made by hook_with_zero_step() or hook_with_zero_step_interleaved()
  /// and registered with register_comm_hook(): each bucket's parameters are stepped once the bucket
  /// is reduced and all-gathered while the rest of the backward's communication is in flight, so
  /// the backward returns with the step done and step() only checks that it happened. The group must
  /// be the world. parameters_as_bucket_view is then ignored: the parameters keep their storage, and
  /// the gathers go through one buffer per bucket (the bucket's parameters) plus this rank's share,
  /// kept between steps, about 1.5 times the parameters' size at 2 ranks. With a single rank nothing
  /// is overlapped and step() steps as usual.
  bool overlap_with_ddp = false;
};

/// Optimizer state sharded over the ranks of a group: PyTorch's ZeroRedundancyOptimizer (ZeRO
/// stage 1, Rajbhandari et al.). The parameters are partitioned over the ranks by size
/// (zero_partition()); each rank builds, with the user's factory, a local optimizer over its shard
/// only, so each keeps the optimizer state (Adam's moments, SGD's momentum) of about 1 / group size
/// of the parameters. step() runs the local optimizer on the shard, then every rank's updated
/// shard reaches every rank (one all-gather of the flat buffer per step).
///
///     model = idist::auto_model(model);   // averages the gradients over the ranks
///     idist::ZeroRedundancyOptimizer opt(model->parameters(),
///         [](std::vector<torch::Tensor> shard) -> std::unique_ptr<torch::optim::Optimizer> {
///           return std::make_unique<torch::optim::Adam>(shard, torch::optim::AdamOptions(1e-3)); });
///     opt.zero_grad(); loss.backward(); opt.step();
///
/// It is a torch::optim::Optimizer over all the parameters (one parameter group): zero_grad()
/// clears every gradient, and options set on param_groups() (e.g. by an LR scheduler) reach the
/// local optimizer at the next step() when it has one parameter group. Its own state() stays empty:
/// the state lives in local_optimizer(). The step can also run inside the backward, overlapped with
/// the gradients' communication (ZeroRedundancyOptimizerOptions::overlap_with_ddp,
/// hook_with_zero_step()). Not supported: add_param_group() after construction, parameters of
/// several dtypes or devices, and moving or replacing the parameters afterwards.
///
/// Collective: the constructor, step(), consolidate_state_dict(), save() and load() are called by
/// every member of the group, in the same order.
///
/// Checkpoints: register it with idist::Checkpoint as an optimizer ({"optimizer", zero}); every rank
/// runs Checkpoint::save, which consolidates the state on the saving rank (save_on_rank, which must
/// be a member of the group), and Checkpoint::load_latest re-shards it at any world size.
class ZeroRedundancyOptimizer : public torch::optim::Optimizer {
 public:
  /// Builds the local optimizer over the shard it is given (a subset of the parameters, in their
  /// original order; empty when the group has more ranks than parameters). It must optimize
  /// exactly those tensors.
  using Factory = std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<torch::Tensor> shard)>;

  /// Partitions `params` over the group and builds this rank's local optimizer with `factory`.
  /// Exchanges the parameters' shapes once over the group, so every member raises the same error.
  /// @throws ValueError on every member of the group when some member passed an empty list, an
  ///         undefined, sparse or non-leaf tensor, the same tensor twice, parameters of more than one
  ///         dtype or device, or a list that differs from the others in count, dtype or shape; or when
  ///         a member's factory is empty, throws, returns null, or returns an optimizer whose
  ///         parameters are not its shard (each message names the member and the problem);
  ///         ValueError on this rank alone when it is not a member of the group.
  ZeroRedundancyOptimizer(std::vector<torch::Tensor> params, Factory factory,
                          ZeroRedundancyOptimizerOptions options = {});
  ~ZeroRedundancyOptimizer() override;
  /// Moves the optimizer (the parameters keep their layout).
  ZeroRedundancyOptimizer(ZeroRedundancyOptimizer&&) noexcept;
  ZeroRedundancyOptimizer& operator=(ZeroRedundancyOptimizer&&) = delete;

  /// One step (PyTorch's step): passes the options of param_groups()[0] to the local optimizer
  /// (when it has a single group), runs its step on this rank's shard with `closure`, then
  /// publishes: every rank receives every other rank's updated parameters. Returns the local
  /// optimizer's result (the closure's loss, or an undefined tensor without a closure). A closure
  /// that communicates (a backward through auto_model) must run as often on every member, which
  /// optimizers that call it a data-dependent number of times (LBFGS) do not guarantee.
  ///
  /// With overlap_with_ddp (and more than one rank) the backward already stepped: step() steps
  /// nothing and returns an undefined tensor, so a loop written for the ordinary optimizer runs
  /// unchanged (PyTorch's step() only logs that it should not be called).
  /// @throws what the local optimizer throws; TimeoutError / BackendError from the publishing
  ///         collective. With overlap_with_ddp: ValueError when a closure is given, or when no
  ///         backward stepped through hook_with_zero_step's hook since the previous step() (the
  ///         hook is not registered, or the backward ran under no_sync()).
  torch::Tensor step(LossClosure closure = nullptr) override;

  /// ZeRO stage 2 for a model wrapped by auto_model: a communication hook that reduce-scatters each
  /// bucket of gradients by owner instead of all-reducing it, so each rank receives the average of
  /// the gradients of its own shard only. With step()'s all-gather of the parameters, a step moves
  /// as many bytes as auto_model's all-reduce alone (stage 1 adds the all-gather on top).
  ///
  ///     idist::ZeroRedundancyOptimizer opt(model->parameters(), factory);
  ///     idist::register_comm_hook(model, opt.reduce_scatter_hook());
  ///
  /// After the backward, the gradients of the parameters other ranks own hold this rank's own
  /// gradients (not averaged): anything that reads every gradient (gradient clipping by the global
  /// norm) must run before the hook replaces the all-reduce, or not at all. Each bucket goes through
  /// one reduce_scatter_v (mpi: one MPI_Ireduce per rank; gloo: each block sent to its owner,
  /// posted when the bucket is issued; nccl: grouped ncclReduce). Not
  /// supported with idist::join (the shadow backwards all-reduce).
  /// @return the hook; it keeps what it needs, so it may outlive the optimizer.
  /// @throws ValueError when the optimizer's group does not hold every rank of the world (auto_model
  ///         averages over the world).
  CommHook reduce_scatter_hook() const;
  /// This rank's optimizer (PyTorch's `optim` attribute): it holds the shard's parameters and state.
  torch::optim::Optimizer& local_optimizer() noexcept;
  /// This rank's optimizer (read only).
  const torch::optim::Optimizer& local_optimizer() const noexcept;
  /// The group rank owning each parameter, in the order the parameters were given.
  const std::vector<int>& owners() const noexcept;
  /// The group the state is sharded over (PyTorch's process_group), as given in the options.
  const Group& group() const noexcept;

  /// Gathers the optimizer state of every member on group rank `to` (PyTorch's
  /// consolidate_state_dict), which keeps it for save_consolidated(); the other members drop any
  /// state consolidated earlier. Collective over the group.
  /// @throws ValueError on every member when `to` is outside [0, group size) or a member's local
  ///         optimizer cannot be serialized.
  void consolidate_state_dict(int to = 0);
  /// Writes the state gathered by the last consolidate_state_dict() on this rank, in the layout of
  /// torch::optim::Optimizer::save for one parameter group over all the parameters (so a plain
  /// torch::optim optimizer of the same kind over the same parameters can load it too). Not
  /// collective (PyTorch's state_dict()).
  /// @throws ValueError when this rank holds no consolidated state.
  void save_consolidated(torch::serialize::OutputArchive& archive) const;

  /// Saves the whole optimizer state: save(archive, 0). Collective over the group, unlike
  /// torch::optim::Optimizer::save (torch::save of this optimizer is collective too).
  /// @throws as consolidate_state_dict().
  void save(torch::serialize::OutputArchive& archive) const override;
  /// Saves the whole optimizer state on group rank `to`: consolidate_state_dict(to), then member
  /// `to` writes it as save_consolidated() does and drops it; the other members write a stub that
  /// load() refuses, naming `to` (keep the archive of member `to`). Collective over the group.
  /// idist::Checkpoint calls it with the group rank of its saving rank (save_on_rank).
  /// @throws as consolidate_state_dict().
  void save(torch::serialize::OutputArchive& archive, int to) const;
  /// Loads a state written by save() or save_consolidated() (at any group size), or by a plain
  /// torch::optim optimizer of the local optimizer's kind over the same parameters in the same
  /// order: each rank takes the state of its own shard, moved to its parameters' device, floating
  /// state in their dtype (PyTorch's Optimizer.load_state_dict rule; step counts stay integers), so
  /// a state saved on GPUs loads onto parameters on the CPU and back. As torch::optim's load, it
  /// restores the state (moments, step counts) and keeps the options.
  /// Collective over the group: every member passes the same archive.
  /// @throws ValueError on every member when some member's archive is a stub of save(), lacks
  ///         an optimizer state, or holds another number of parameters (or other element counts).
  void load(torch::serialize::InputArchive& archive) override;

 private:
  explicit ZeroRedundancyOptimizer(std::unique_ptr<detail::ZeroImpl> impl);
  friend CommHook hook_with_zero_step(CommHook hook, ZeroRedundancyOptimizer& zero);
  friend CommHook hook_with_zero_step_interleaved(CommHook hook, ZeroRedundancyOptimizer& zero);
  std::unique_ptr<detail::ZeroImpl> impl_;
};

/// Runs `zero`'s step inside the backward (PyTorch's ddp_zero_hook.hook_with_zero_step): wraps the
/// communication hook `hook` (comm_hooks::allreduce() for ZeRO stage 1, zero.reduce_scatter_hook()
/// for stage 2, or a compressing hook) so that, once the backward's last bucket is launched, each
/// bucket in turn waits for its reduction, the local optimizer steps this rank's parameters in it,
/// and one all-gather per bucket sends them to the other ranks while the remaining reductions are
/// in flight. The backward returns with every parameter updated; the trajectory is the unsharded
/// optimizer's. Register the result with register_comm_hook() on the model auto_model wrapped:
///
///     idist::ZeroRedundancyOptimizer opt(model->parameters(), factory, {.overlap_with_ddp = true});
///     idist::register_comm_hook(model, idist::hook_with_zero_step(idist::comm_hooks::allreduce(), opt));
///     opt.zero_grad(); loss.backward(); opt.step();   // step() only checks that the backward stepped
///
/// Unlike PyTorch's: no warm-up iterations without updates (the buckets are known from the first
/// backward), any backend (PyTorch's needs NCCL), and each bucket's parameters stay split by
/// zero_partition()'s owners (PyTorch assigns whole buckets; shard_buckets is not offered).
/// The local optimizer steps once per bucket with the gradients of the other parameters undefined,
/// so it must update each parameter from its own gradient alone and skip parameters without one
/// (SGD, Adam, AdamW, Adagrad, RMSprop; not LBFGS). Anything that reads the gradients between
/// backward and step (clipping by the global norm) sees them after the parameters were updated.
/// Parameters no rank used in a backward (find_unused_parameters) are stepped with a zero gradient.
/// Not supported with idist::join (its shadow backwards would step the joined ranks' shards).
/// @param hook the hook that reduces each bucket; its reduction is waited before the step.
/// @param zero an optimizer made with overlap_with_ddp = true over the model's parameters; the hook
///        keeps what it needs, and raises ValueError if it runs after the optimizer was destroyed.
/// @return the hook to register.
/// @throws ValueError when `hook` is empty, `zero` was made without overlap_with_ddp, or its group is
///         not the world; during the backward, ValueError when a bucket holds a parameter `zero` was
///         not given.
CommHook hook_with_zero_step(CommHook hook, ZeroRedundancyOptimizer& zero);

/// As hook_with_zero_step(), with the steps interleaved with the backward's computation (PyTorch's
/// hook_with_zero_step_interleaved): when bucket k + 1 is launched, bucket k's reduction is waited
/// and its parameters stepped and all-gathered, so the optimizer's computation and the gathers
/// overlap the rest of the backward. On mpi, which runs several collectives at once, this form
/// measured fastest across hosts; on gloo, whose collectives of a group run one at a time, neither
/// form gains over step() (figures in docs/performance.md). hook_with_zero_step() never makes the
/// backward's computation wait for a reduction.
/// @throws as hook_with_zero_step().
CommHook hook_with_zero_step_interleaved(CommHook hook, ZeroRedundancyOptimizer& zero);

}  // namespace idist
