// idist::nn::SyncBatchNorm (idist/torch/nn/sync_batch_norm.hpp): the autograd function of its
// training-mode forward and backward, and the module's methods.
#include "idist/torch/nn/sync_batch_norm.hpp"

#include <string>
#include <vector>

#include <torch/autograd.h>
#include <torch/nn/functional/batchnorm.h>

#include <fmt/format.h>

#include "idist/context.hpp"
#include "idist/error.hpp"
#include "idist/torch/collectives.hpp"
#include "torch/comm/comm.hpp"

namespace idist::nn {

namespace {

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
    const int n = detail::comm::process_group(group).size();
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
      throw ValueError(fmt::format(
          "SyncBatchNorm: expected more than 1 value per channel when training, got {} over the group (input size {} "
          "on rank {})",
          static_cast<int64_t>(total), c10::str(input.sizes()), get_rank()));
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

}  // namespace

SyncBatchNormImpl::SyncBatchNormImpl(const SyncBatchNormOptions& options) : options(options) {  // NOLINT
  if (options.num_features() <= 0)
    throw ValueError(
        fmt::format("SyncBatchNorm: num_features should be positive, but given {}", options.num_features()));
  if (!(options.eps() >= 0))
    throw ValueError(fmt::format("SyncBatchNorm: eps should be non-negative, but given {}", options.eps()));
  reset();
}

void SyncBatchNormImpl::reset() {
  const int64_t c = options.num_features();
  const bool track = options.track_running_stats();
  register_state(
      options.affine() ? torch::empty({c}) : torch::Tensor(), options.affine() ? torch::empty({c}) : torch::Tensor(),
      track ? torch::zeros({c}) : torch::Tensor(), track ? torch::ones({c}) : torch::Tensor(),
      track ? torch::tensor(0, torch::dtype(torch::kLong)) : torch::Tensor(), options.affine(), options.affine());
  reset_parameters();
}

void SyncBatchNormImpl::reset_running_stats() {
  if (!options.track_running_stats()) return;
  torch::NoGradGuard no_grad;
  running_mean.zero_();
  running_var.fill_(1);
  num_batches_tracked.zero_();
}

void SyncBatchNormImpl::reset_parameters() {
  reset_running_stats();
  if (!options.affine()) return;
  torch::NoGradGuard no_grad;
  weight.fill_(1);
  bias.zero_();
}

torch::Tensor SyncBatchNormImpl::forward(const torch::Tensor& input) {
  if (input.dim() < 2)
    throw ValueError(fmt::format("SyncBatchNorm: expected an input of at least 2 dimensions [N, C, *], but got {}",
                                 c10::str(input.sizes())));
  if (input.size(1) != options.num_features())
    throw ValueError(
        fmt::format("SyncBatchNorm: expected {} channels (dimension 1 of the input), but got input of size {}",
                    options.num_features(), c10::str(input.sizes())));
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
    throw ValueError(fmt::format(
        "SyncBatchNorm: rank {} is not a member of the group {} given in SyncBatchNormOptions; every rank that runs "
        "the module must be one",
        get_rank(), group.str()));
  const bool sync = batch_stats && detail::comm::process_group(group).size() > 1;
  if (!sync)
    return torch::batch_norm(input, weight, bias, rmean, rvar, use_batch_stats, factor, options.eps(),
                             /*cudnn_enabled=*/true);
  std::vector<int64_t> ranks(group.ranks().begin(), group.ranks().end());
  auto opt = [](const torch::Tensor& t) { return t.defined() ? c10::optional<torch::Tensor>(t) : c10::nullopt; };
  return SyncBatchNormFunction::apply(input, opt(weight), opt(bias), opt(rmean), opt(rvar), options.eps(), factor,
                                      std::move(ranks))[0];
}

void SyncBatchNormImpl::pretty_print(std::ostream& stream) const {
  stream << "idist::nn::SyncBatchNorm(" << options.num_features() << ", eps=" << options.eps() << ", momentum=";
  if (options.momentum())
    stream << *options.momentum();
  else
    stream << "None";
  stream << ", affine=" << (options.affine() ? "true" : "false")
         << ", track_running_stats=" << (options.track_running_stats() ? "true" : "false") << ")";
}

void SyncBatchNormImpl::register_state(torch::Tensor w, torch::Tensor b, torch::Tensor rmean, torch::Tensor rvar,
                                       torch::Tensor nbt, bool w_grad, bool b_grad) {
  weight = register_parameter("weight", std::move(w), /*requires_grad=*/w_grad);
  bias = register_parameter("bias", std::move(b), /*requires_grad=*/b_grad);
  running_mean = register_buffer("running_mean", std::move(rmean));
  running_var = register_buffer("running_var", std::move(rvar));
  num_batches_tracked = register_buffer("num_batches_tracked", std::move(nbt));
}

}  // namespace idist::nn
