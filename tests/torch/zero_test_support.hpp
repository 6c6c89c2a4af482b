#pragma once
// What the ZeroRedundancyOptimizer tests share: the float64 MLP whose parameters have uneven sizes
// (60, 10, 100, 10, 30, 3: unequal shards at 2 and 3 ranks), on test_device(), the local Adam, and
// the distance between two models.
#include <torch/torch.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "test_device.hpp"

namespace idist::test::zero {

struct Mlp : torch::nn::Module {
  Mlp() {
    a = register_module("a", torch::nn::Linear(6, 10));
    b = register_module("b", torch::nn::Linear(10, 10));
    c = register_module("c", torch::nn::Linear(10, 3));
    to(torch::kFloat64);
  }
  torch::Tensor forward(const torch::Tensor& x) { return c(torch::tanh(b(torch::tanh(a(x))))); }
  torch::nn::Linear a{nullptr}, b{nullptr}, c{nullptr};
};

/// An Mlp initialised from `seed` (on the CPU's generator, so every device starts alike), on test_device().
inline std::shared_ptr<Mlp> make_mlp(int seed) {
  torch::manual_seed(seed);
  auto mlp = std::make_shared<Mlp>();
  mlp->to(test_device());
  return mlp;
}

/// Adam over `params` with the tests' learning rate.
inline std::unique_ptr<torch::optim::Optimizer> adam(std::vector<torch::Tensor> params) {
  return std::make_unique<torch::optim::Adam>(std::move(params), torch::optim::AdamOptions(1e-2));
}

/// Largest |x - y| over the parameters of two models of the same type.
inline double max_diff(const torch::nn::Module& x, const torch::nn::Module& y) {
  double d = 0;
  const auto p = x.parameters();
  const auto q = y.parameters();
  for (std::size_t i = 0; i < p.size(); ++i) d = std::max(d, (p[i] - q[i]).abs().max().item<double>());
  return d;
}

}  // namespace idist::test::zero
