#pragma once
// Test helper: the exact average over ranks of the gradients a fresh, unsynchronised copy of a model
// computes, the reference auto_model's synchronised gradients are compared with.
#include <memory>
#include <vector>

#include "idist/idist.hpp"

namespace idist_test {

/// Copies `like`'s parameters into a new Net (default-constructed: no reducer), runs
/// `loss(copy).backward()`, and returns each parameter's gradient all-reduced and divided by the
/// world size, in parameters() order. Collective: every rank calls it with its own data.
template <class Net, class LossFn>
std::vector<torch::Tensor> averaged_reference(const Net& like, LossFn&& loss) {
  auto copy = std::make_shared<Net>();
  copy->to(like.parameters().front().device());  // where auto_model put the model
  {
    torch::NoGradGuard g;
    auto src = like.parameters();
    auto dst = copy->parameters();
    for (std::size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
  }
  loss(*copy).backward();
  std::vector<torch::Tensor> out;
  for (auto& p : copy->parameters()) {
    torch::Tensor g = p.grad().clone();
    idist::all_reduce(g);
    out.push_back(g / idist::get_world_size());
  }
  return out;
}

}  // namespace idist_test
