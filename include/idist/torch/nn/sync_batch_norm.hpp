#pragma once
/// @file
/// idist::nn::SyncBatchNorm: batch normalization whose batch statistics, and their gradients, are
/// reduced over the ranks of a group, so that N ranks each holding a share of a batch normalise
/// exactly as one process holding the whole batch would. Mirrors torch.nn.SyncBatchNorm (its
/// forward in torch/nn/modules/batchnorm.py and the autograd function SyncBatchNorm in
/// torch/nn/modules/_functions.py), written with idist's collectives and plain tensor operations
/// (LibTorch 1.13 implements batch_norm_stats and its kin for CUDA only).
///
/// Algorithm, per channel c of an input [N, C, *] in training mode:
/// - forward: each rank computes its count n_r (elements per channel), mean m_r and
///   invstd_r = 1 / sqrt(var_r + eps) (var_r biased); one all_gather of [m_r, invstd_r, n_r] gives
///   every rank every rank's statistics (ranks with an empty batch are left out); the global mean and
///   biased variance follow from the parallel-variance formula; the running statistics are updated
///   with the global mean and the unbiased global variance (n / (n - 1)); the output is
///   (x - mean) * invstd * weight + bias;
/// - backward: each rank computes sum(dy) and sum(dy * (x - mean)) per channel; one all_reduce (SUM)
///   of both gives the global sums, from which the input gradient follows exactly as for one process
///   holding the global batch. The weight and bias gradients stay local (sum(dy * xhat), sum(dy) over
///   this rank's rows): summed over the ranks (what auto_model's gradient averaging does, up to the
///   division by the world size) they are the global batch's gradients.
///
/// Every rank of the group must call forward and backward the same number of times (they are
/// collectives); a rank with an empty batch still takes part. Double backward is not supported.
/// The autograd function and the module's methods are compiled into idist_torch.

#include <cstdint>
#include <memory>
#include <ostream>

#include <torch/nn/cloneable.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/options/batchnorm.h>
#include <torch/nn/pimpl.h>

#include "idist/group.hpp"

namespace idist::nn {

/// Options of SyncBatchNorm: torch::nn::BatchNormOptions's fields (with their defaults) plus the
/// group whose ranks share the statistics. Mirrors the arguments of torch.nn.SyncBatchNorm
/// (num_features, eps, momentum, affine, track_running_stats, process_group).
struct SyncBatchNormOptions {
  /// Number of channels C of the input [N, C, *].
  /* implicit */ SyncBatchNormOptions(int64_t num_features) : num_features_(num_features) {}  // NOLINT
  /// The fields of a torch::nn::BatchNormOptions (what auto_model's sync_bn conversion uses).
  explicit SyncBatchNormOptions(const torch::nn::BatchNormOptions& bn)
      : num_features_(bn.num_features()),
        eps_(bn.eps()),
        momentum_(bn.momentum()),
        affine_(bn.affine()),
        track_running_stats_(bn.track_running_stats()) {}

  /// Number of channels C of the input [N, C, *]; must be positive.
  TORCH_ARG(int64_t, num_features);
  /// Added to the variance for numerical stability; must be non-negative.
  TORCH_ARG(double, eps) = 1e-5;
  /// Weight of the current batch in the running statistics; nullopt for a cumulative average
  /// (factor 1 / num_batches_tracked), as in torch.
  TORCH_ARG(c10::optional<double>, momentum) = 0.1;
  /// Learnable per-channel weight (initialised to 1) and bias (initialised to 0).
  TORCH_ARG(bool, affine) = true;
  /// Keep running_mean / running_var (used in eval mode) and num_batches_tracked. Without them,
  /// eval mode normalises with the (synchronised) batch statistics.
  TORCH_ARG(bool, track_running_stats) = true;
  /// The ranks sharing statistics (torch's process_group); the whole world by default. Every rank
  /// that runs the module must be a member.
  TORCH_ARG(Group, group) = Group{};
};

/// Implementation of SyncBatchNorm (use the holder idist::nn::SyncBatchNorm). Parameters `weight`
/// and `bias` [C] (when affine), buffers `running_mean`, `running_var` [C] and
/// `num_batches_tracked` (int64 scalar) when track_running_stats: the names and shapes of
/// torch::nn::BatchNorm{1,2,3}d, so state dicts and auto_model's rank-0 broadcast carry over.
class SyncBatchNormImpl : public torch::nn::Cloneable<SyncBatchNormImpl> {
 public:
  /// A SyncBatchNorm over `num_features` channels with default options.
  explicit SyncBatchNormImpl(int64_t num_features) : SyncBatchNormImpl(SyncBatchNormOptions(num_features)) {}
  /// A SyncBatchNorm with the given options.
  /// @throws ValueError when num_features is not positive or eps is negative.
  explicit SyncBatchNormImpl(const SyncBatchNormOptions& options);  // NOLINT

  /// (Re)creates the parameters and buffers (torch::nn::Cloneable's contract).
  void reset() override;

  /// A SyncBatchNorm sharing the parameters and buffers of `bn` (the same tensors, so that an
  /// optimizer built on bn's parameters keeps working) with bn's options and training mode, over
  /// `group`. What torch.nn.SyncBatchNorm.convert_sync_batchnorm does for each BatchNorm module.
  template <std::size_t D, typename Derived>
  static std::shared_ptr<SyncBatchNormImpl> from_batch_norm(const torch::nn::BatchNormImplBase<D, Derived>& bn,
                                                            const Group& group = {}) {
    SyncBatchNormOptions opts(bn.options);
    opts.group(group);
    std::shared_ptr<SyncBatchNormImpl> m(new SyncBatchNormImpl(opts, Adopt{}));
    m->register_state(bn.weight, bn.bias, bn.running_mean, bn.running_var, bn.num_batches_tracked,
                      bn.weight.defined() && bn.weight.requires_grad(), bn.bias.defined() && bn.bias.requires_grad());
    m->train(bn.is_training());
    return m;
  }

  /// Zeroes running_mean and num_batches_tracked, sets running_var to one.
  void reset_running_stats();

  /// reset_running_stats(), then weight = 1 and bias = 0.
  void reset_parameters();

  /// Normalises `input` [N, C, *] (at least 2 dimensions, C = num_features). In training mode the
  /// statistics are those of the group's global batch (one all_gather; backward: one all_reduce),
  /// except with world size 1, where it is plain batch normalization, as torch does. In eval mode
  /// (with running statistics) nothing is communicated. Mirrors torch.nn.SyncBatchNorm.forward.
  /// @throws ValueError for an input of fewer than 2 dimensions or with another channel count, when
  ///         this rank is not in the options' group (training, group of more than one rank), or
  ///         when the global batch has one value per channel in training mode.
  torch::Tensor forward(const torch::Tensor& input);

  /// Prints "idist::nn::SyncBatchNorm(C, eps=..., momentum=..., affine=..., track_running_stats=...)".
  void pretty_print(std::ostream& stream) const override;

  /// The options the module was built with.
  SyncBatchNormOptions options;
  /// Learnable scale [C] (undefined without affine).
  torch::Tensor weight;
  /// Learnable shift [C] (undefined without affine).
  torch::Tensor bias;
  /// Running mean [C] (undefined without track_running_stats).
  torch::Tensor running_mean;
  /// Running unbiased variance [C] (undefined without track_running_stats).
  torch::Tensor running_var;
  /// Number of training forwards so far (int64 scalar; undefined without track_running_stats).
  torch::Tensor num_batches_tracked;

 private:
  struct Adopt {};
  // Validated options, no state yet (from_batch_norm registers bn's tensors).
  SyncBatchNormImpl(const SyncBatchNormOptions& opts, Adopt) : options(opts) {}

  // Registers the parameters (requires_grad as given; false when undefined) and the buffers.
  void register_state(torch::Tensor w, torch::Tensor b, torch::Tensor rmean, torch::Tensor rvar, torch::Tensor nbt,
                      bool w_grad, bool b_grad);
};

/// Module holder of SyncBatchNormImpl: `idist::nn::SyncBatchNorm bn(SyncBatchNormOptions(64).momentum(0.01));`.
TORCH_MODULE(SyncBatchNorm);

}  // namespace idist::nn
