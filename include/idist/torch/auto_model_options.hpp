#pragma once
/// @file
/// AutoModelOptions: the options of auto_model and of the gradient reducer behind it.

#include <optional>

namespace idist {

/// Options of auto_model (the keyword arguments ignite forwards to DistributedDataParallel), which
/// are also the options of its gradient reducer.
struct AutoModelOptions {
  /// ignite's sync_bn: with world size > 1, replace every BatchNorm1d/2d/3d of the model by
  /// idist::nn::SyncBatchNorm (batch statistics over all ranks) through
  /// idist::nn::convert_sync_batchnorm, which keeps the parameter and buffer tensors and names.
  /// BatchNorm entries of Sequential / ModuleList / ModuleDict and registered children that no
  /// member holds are replaced; a model with any other BatchNorm (a member holder of a user module,
  /// or the model itself) is rejected with a ValueError naming those modules, on every rank. A
  /// no-op when serial (as in ignite). With sync_bn = false, BatchNorm stays per-rank.
  bool sync_bn = false;
  /// Cap of a gradient bucket in MiB (DDP's bucket_cap_mb, whose default is 25); the first bucket is
  /// capped at 1 MiB or this, whichever is smaller. Must be positive. Unset (the default), auto_model
  /// tunes it: during the first synchronised iterations it times backward with its communication
  /// (from the first gradient to the end of the final callback) under the caps 25, 10, 5, 2 and 1 MiB
  /// that give distinct buckets (1 untimed + 5 timed iterations each, the buckets rebuilt between
  /// trials), keeps the cap with the smallest median (the slowest rank's), the same on every rank, and
  /// logs it once at Info. Bucketing does not change the averaged values. Not tuned, 25 MiB: with
  /// IDIST_BUCKET_AUTOTUNE=0 in the environment, or once a communication hook other than the built-in
  /// allreduce / fp16_compress / bf16_compress is registered (PowerSGD's state follows the buckets).
  std::optional<double> bucket_cap_mb = std::nullopt;
  /// Accept parameters that get no gradient in a backward (DDP's find_unused_parameters): they
  /// contribute zero, and a parameter no rank used keeps its gradient untouched. When false, such
  /// a backward fails with a ValueError naming the parameters.
  bool find_unused_parameters = false;
  /// Keep buffers (e.g. batch-norm running statistics) equal to rank 0's (DDP's broadcast_buffers).
  /// LibTorch has no forward hooks, so they are broadcast after each synchronised backward rather
  /// than before each forward: after every training step all ranks hold rank 0's buffers.
  bool broadcast_buffers = true;
  /// Make each parameter's .grad() share memory with its slot of the gradient bucket (DDP's
  /// gradient_as_bucket_view), so the buckets cost no memory beyond the gradients and nothing is
  /// copied back after the all-reduce. idist defaults to true where DDP defaults to false: the
  /// aliases carry no autograd view metadata, so LibTorch's zero_grad() and detach_() work on them
  /// as on any gradient, and gradient values are identical either way. Set false to give the
  /// gradients storage of their own (the buckets are then one extra copy of the gradients).
  bool gradient_as_bucket_view = true;
  /// The parameters that receive a gradient are the same in every iteration (DDP's static_graph):
  /// the first backward finds the unused ones, later backwards treat them as ready at once (their
  /// buckets need not wait for the end of backward) and skip the used-parameter all-reduce. A
  /// parameter that changes from unused to used fails the backward with ValueError.
  bool static_graph = false;
  /// After the first backward, rebuild the gradient buckets in the order rank 0's gradients became
  /// ready (DDP does so always): a model whose registration order differs from its execution
  /// order then overlaps its all-reduces with backward. false keeps reverse registration order.
  bool rebuild_buckets = true;
  /// Cap of the first bucket in MiB (DDP: 1 MiB), lowered to bucket_cap_mb when that is smaller: the
  /// first bucket leaves early in backward.
  double first_bucket_cap_mb = 1.0;
};

}  // namespace idist
