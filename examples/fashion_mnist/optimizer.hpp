#pragma once
// The example's optimizer: SGD with momentum or Adam (--optimizer), its state sharded over the ranks by
// idist::ZeroRedundancyOptimizer with --zero (each rank keeps the state of about 1 / world size of
// the parameters; the run's weights are those of the unsharded optimizer).
#include <memory>
#include <vector>

#include <torch/torch.h>

#include <idist/idist.hpp>

#include "options.hpp"

namespace fashion_mnist {

/// The unsharded optimizer of the options over `params`.
inline std::unique_ptr<torch::optim::Optimizer> make_plain_optimizer(const Options& o,
                                                                     std::vector<torch::Tensor> params) {
  if (o.optimizer == "adam")
    return std::make_unique<torch::optim::Adam>(std::move(params), torch::optim::AdamOptions(o.lr));
  return std::make_unique<torch::optim::SGD>(std::move(params), torch::optim::SGDOptions(o.lr).momentum(o.momentum));
}

/// The optimizer of the run over `params`: the plain one, or with --zero a ZeroRedundancyOptimizer
/// whose local optimizer is the plain one over this rank's shard (collective then).
inline std::shared_ptr<torch::optim::Optimizer> make_optimizer(const Options& o, std::vector<torch::Tensor> params) {
  if (!o.zero) return make_plain_optimizer(o, std::move(params));
  return std::make_shared<idist::ZeroRedundancyOptimizer>(
      std::move(params), [&o](std::vector<torch::Tensor> shard) { return make_plain_optimizer(o, std::move(shard)); });
}

}  // namespace fashion_mnist
