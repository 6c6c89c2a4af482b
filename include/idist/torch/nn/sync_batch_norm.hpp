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

#include <algorithm>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <torch/autograd.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/functional/batchnorm.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/options/batchnorm.h>
#include <torch/nn/pimpl.h>

#include "idist/context.hpp"
#include "idist/detail/format.hpp"
#include "idist/error.hpp"
#include "idist/group.hpp"
#include "idist/torch/collectives.hpp"

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

namespace detail {

/// The autograd function of SyncBatchNorm in training mode (torch/nn/modules/_functions.py's
/// SyncBatchNorm): forward all-gathers the per-rank count, mean and invstd, backward all-reduces
/// sum(dy) and sum(dy * (x - mean)). Arguments of forward: input [N, C, *] (contiguous), weight and
/// bias [C] or undefined, running_mean / running_var [C] or undefined (updated in place), eps,
/// momentum (the factor of the running-statistics update) and the group's ranks (empty: world).
struct SyncBatchNormFunction : public torch::autograd::Function<SyncBatchNormFunction> {
  /// Training-mode forward; returns {output} shaped like input.
  /// @throws ValueError when the global batch has at most one value per channel.
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input,
                                                const c10::optional<at::Tensor>& weight_opt,
                                                const c10::optional<at::Tensor>& bias_opt,
                                                const c10::optional<at::Tensor>& running_mean_opt,
                                                const c10::optional<at::Tensor>& running_var_opt, double eps,
                                                double momentum, std::vector<int64_t> group_ranks) {
    // Optional tensors: LibTorch's custom functions accept no undefined Tensor argument.
    const at::Tensor weight = weight_opt.value_or(at::Tensor());
    const at::Tensor bias = bias_opt.value_or(at::Tensor());
    const at::Tensor running_mean = running_mean_opt.value_or(at::Tensor());
    const at::Tensor running_var = running_var_opt.value_or(at::Tensor());
    const Group group = make_group(group_ranks);
    const int64_t channels = input.size(1);
    const int64_t count = input.size(1) == 0 ? 0 : input.numel() / channels;
    const at::Tensor x = input.contiguous();
    const std::vector<int64_t> reduce_dims = reduction_dims(x);
    const auto opts = x.options();

    // This rank's statistics: [mean (C), invstd (C), count (1)], zeros for an empty batch.
    at::Tensor local;
    if (count > 0) {
      const at::Tensor mean = x.mean(reduce_dims);
      const at::Tensor var = (x - shape_c(mean, x.dim())).square().mean(reduce_dims);
      local = at::cat({mean, (var + eps).rsqrt(), at::full({1}, double(count), opts)});
    } else {
      local = at::zeros({2 * channels + 1}, opts);
    }
    const int n = current_model().process_group(group).size();
    at::Tensor gathered = at::empty({n, 2 * channels + 1}, opts);
    all_gather_async(local, gathered, group).wait();

    // Ranks with an empty batch are left out (torch masks count < 1).
    const at::Tensor counts_all = gathered.select(1, 2 * channels);
    const at::Tensor present = counts_all >= 1;
    const at::Tensor means = gathered.narrow(1, 0, channels).index({present});
    const at::Tensor invstds = gathered.narrow(1, channels, channels).index({present});
    const at::Tensor counts = counts_all.index({present}).unsqueeze(1);  // [R, 1]
    const double total = counts.sum().item<double>();
    if (total <= 1)
      throw ValueError(idist::detail::format_message(
          "SyncBatchNorm: expected more than 1 value per channel when training, got {} over the group (input size {} "
          "on rank {})",
          static_cast<int64_t>(total), idist::detail::shape_str(input.sizes()), get_rank()));
    // Parallel variance: the global biased variance from the per-rank means and variances.
    const at::Tensor mean = (means * counts).sum(0) / total;
    const at::Tensor local_vars = invstds.square().reciprocal() - eps;
    const at::Tensor var = ((local_vars + (means - mean).square()) * counts).sum(0) / total;
    const at::Tensor invstd = (var + eps).rsqrt();
    if (running_mean.defined()) {
      running_mean.mul_(1 - momentum).add_(mean.to(running_mean.scalar_type()), momentum);
      running_var.mul_(1 - momentum).add_((var * (total / (total - 1))).to(running_var.scalar_type()), momentum);
    }

    at::Tensor out = (x - shape_c(mean, x.dim())) * shape_c(invstd, x.dim());
    if (weight.defined()) out = out * shape_c(weight, x.dim());
    if (bias.defined()) out = out + shape_c(bias, x.dim());
    ctx->save_for_backward({x, weight, mean, invstd});
    ctx->saved_data["total"] = total;
    ctx->saved_data["group"] = group_ranks;
    return {out};
  }

  /// Backward: {grad_input, grad_weight (local), grad_bias (local), and undefined for the rest}.
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor& mean = saved[2];
    const at::Tensor& invstd = saved[3];
    const double total = ctx->saved_data["total"].toDouble();
    const Group group = make_group(ctx->saved_data["group"].toIntVector());
    const int64_t channels = x.size(1);
    const int dims = int(x.dim());
    at::Tensor dy = grad_outputs[0];
    if (!dy.defined()) dy = at::zeros_like(x);
    dy = dy.contiguous();

    at::Tensor grad_input, grad_weight, grad_bias;
    const bool local_rows = x.numel() > 0;
    at::Tensor sum_dy = at::zeros({channels}, x.options());
    at::Tensor sum_dy_xmu = at::zeros({channels}, x.options());
    if (local_rows) {
      const std::vector<int64_t> reduce_dims = reduction_dims(x);
      const at::Tensor xmu = x - shape_c(mean, dims);
      sum_dy = dy.sum(reduce_dims);
      sum_dy_xmu = (dy * xmu).sum(reduce_dims);
      if (weight.defined() && ctx->needs_input_grad(1)) grad_weight = sum_dy_xmu * invstd;
      if (weight.defined() && ctx->needs_input_grad(2)) grad_bias = sum_dy.clone();
    }
    if (ctx->needs_input_grad(0)) {
      at::Tensor combined = at::cat({sum_dy, sum_dy_xmu});
      idist::all_reduce(combined, ReduceOp::Sum, group);
      if (local_rows) {
        const at::Tensor mean_dy = combined.narrow(0, 0, channels) / total;
        const at::Tensor mean_dy_xmu = combined.narrow(0, channels, channels) / total;
        const at::Tensor xmu = x - shape_c(mean, dims);
        at::Tensor scale = invstd;
        if (weight.defined()) scale = scale * weight;
        grad_input =
            (dy - shape_c(mean_dy, dims) - xmu * shape_c(invstd.square() * mean_dy_xmu, dims)) * shape_c(scale, dims);
      } else {
        grad_input = at::zeros_like(x);
      }
    }
    // Empty batch: weight and bias gradients are zero (undefined: autograd reads zeros).
    return {grad_input, grad_weight, grad_bias, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }

 private:
  static Group make_group(const std::vector<int64_t>& ranks) {
    if (ranks.empty()) return Group{};
    return Group(std::vector<int>(ranks.begin(), ranks.end()));
  }
  /// Every dimension but the channels (1).
  static std::vector<int64_t> reduction_dims(const at::Tensor& x) {
    std::vector<int64_t> d{0};
    for (int64_t i = 2; i < x.dim(); ++i) d.push_back(i);
    return d;
  }
  /// A [C] tensor viewed as [1, C, 1, ...] to broadcast against an input of `dims` dimensions.
  static at::Tensor shape_c(const at::Tensor& t, int64_t dims) {
    std::vector<int64_t> shape(std::size_t(dims), 1);
    shape[1] = t.size(0);
    return t.view(shape);
  }
};

}  // namespace detail

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
  explicit SyncBatchNormImpl(const SyncBatchNormOptions& options) : options(options) {  // NOLINT
    if (options.num_features() <= 0)
      throw ValueError(idist::detail::format_message("SyncBatchNorm: num_features should be positive, but given {}",
                                                     options.num_features()));
    if (!(options.eps() >= 0))
      throw ValueError(
          idist::detail::format_message("SyncBatchNorm: eps should be non-negative, but given {}", options.eps()));
    reset();
  }

  /// (Re)creates the parameters and buffers (torch::nn::Cloneable's contract).
  void reset() override {
    const int64_t c = options.num_features();
    const bool track = options.track_running_stats();
    register_state(
        options.affine() ? torch::empty({c}) : torch::Tensor(), options.affine() ? torch::empty({c}) : torch::Tensor(),
        track ? torch::zeros({c}) : torch::Tensor(), track ? torch::ones({c}) : torch::Tensor(),
        track ? torch::tensor(0, torch::dtype(torch::kLong)) : torch::Tensor(), options.affine(), options.affine());
    reset_parameters();
  }

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
  void reset_running_stats() {
    if (!options.track_running_stats()) return;
    torch::NoGradGuard no_grad;
    running_mean.zero_();
    running_var.fill_(1);
    num_batches_tracked.zero_();
  }

  /// reset_running_stats(), then weight = 1 and bias = 0.
  void reset_parameters() {
    reset_running_stats();
    if (!options.affine()) return;
    torch::NoGradGuard no_grad;
    weight.fill_(1);
    bias.zero_();
  }

  /// Normalises `input` [N, C, *] (at least 2 dimensions, C = num_features). In training mode the
  /// statistics are those of the group's global batch (one all_gather; backward: one all_reduce),
  /// except with world size 1, where it is plain batch normalization, as torch does. In eval mode
  /// (with running statistics) nothing is communicated. Mirrors torch.nn.SyncBatchNorm.forward.
  /// @throws ValueError for an input of fewer than 2 dimensions or with another channel count, when
  ///         this rank is not in the options' group (training, group of more than one rank), or
  ///         when the global batch has one value per channel in training mode.
  torch::Tensor forward(const torch::Tensor& input) {
    if (input.dim() < 2)
      throw ValueError(idist::detail::format_message(
          "SyncBatchNorm: expected an input of at least 2 dimensions [N, C, *], but got {}",
          idist::detail::shape_str(input.sizes())));
    if (input.size(1) != options.num_features())
      throw ValueError(idist::detail::format_message(
          "SyncBatchNorm: expected {} channels (dimension 1 of the input), but got input of size {}",
          options.num_features(), idist::detail::shape_str(input.sizes())));
    double factor = options.momentum().value_or(0.0);
    if (is_training() && options.track_running_stats()) {
      {
        torch::NoGradGuard no_grad;
        num_batches_tracked.add_(1);
      }
      if (!options.momentum()) factor = 1.0 / double(num_batches_tracked.item<int64_t>());
    }
    const bool use_batch_stats = is_training() || !options.track_running_stats();
    const bool keep_running = !is_training() || options.track_running_stats();
    const torch::Tensor rmean = keep_running ? running_mean : torch::Tensor();
    const torch::Tensor rvar = keep_running ? running_var : torch::Tensor();
    const Group& group = options.group();
    const bool batch_stats = use_batch_stats && is_training();
    // A non-member that runs the module fails before any communication; a member resolves the group.
    if (batch_stats && !group.contains(get_rank()))
      throw ValueError(idist::detail::format_message(
          "SyncBatchNorm: rank {} is not a member of the group {} given in SyncBatchNormOptions; every rank that runs "
          "the module must be one",
          get_rank(), group.str()));
    const bool sync = batch_stats && current_model().process_group(group).size() > 1;
    if (!sync)
      return torch::batch_norm(input, weight, bias, rmean, rvar, use_batch_stats, factor, options.eps(),
                               /*cudnn_enabled=*/true);
    std::vector<int64_t> ranks(group.ranks().begin(), group.ranks().end());
    auto opt = [](const torch::Tensor& t) { return t.defined() ? c10::optional<torch::Tensor>(t) : c10::nullopt; };
    return detail::SyncBatchNormFunction::apply(input, opt(weight), opt(bias), opt(rmean), opt(rvar), options.eps(),
                                                factor, std::move(ranks))[0];
  }

  /// Prints "idist::nn::SyncBatchNorm(C, eps=..., momentum=..., affine=..., track_running_stats=...)".
  void pretty_print(std::ostream& stream) const override {
    stream << "idist::nn::SyncBatchNorm(" << options.num_features() << ", eps=" << options.eps() << ", momentum=";
    if (options.momentum())
      stream << *options.momentum();
    else
      stream << "None";
    stream << ", affine=" << (options.affine() ? "true" : "false")
           << ", track_running_stats=" << (options.track_running_stats() ? "true" : "false") << ")";
  }

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
                      bool w_grad, bool b_grad) {
    weight = register_parameter("weight", std::move(w), /*requires_grad=*/w_grad);
    bias = register_parameter("bias", std::move(b), /*requires_grad=*/b_grad);
    running_mean = register_buffer("running_mean", std::move(rmean));
    running_var = register_buffer("running_var", std::move(rvar));
    num_batches_tracked = register_buffer("num_batches_tracked", std::move(nbt));
  }
};

/// Module holder of SyncBatchNormImpl: `idist::nn::SyncBatchNorm bn(SyncBatchNormOptions(64).momentum(0.01));`.
TORCH_MODULE(SyncBatchNorm);

}  // namespace idist::nn
