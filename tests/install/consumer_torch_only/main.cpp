// Consumer of an installed idist that calls only functions of libidist_torch (serial): a tensor
// all_reduce and auto_model. Exits non-zero on any mismatch.
#include <cstdio>
#include <exception>

#include <torch/torch.h>

#include <idist/torch/auto_model.hpp>
#include <idist/torch/collectives.hpp>

int main() {
  try {
    const torch::Tensor t = idist::all_reduce(torch::arange(3, torch::kFloat32));
    if (!t.equal(torch::arange(3, torch::kFloat32))) {
      std::fprintf(stderr, "consumer_torch_only: FAILED: serial all_reduce of a tensor\n");
      return 1;
    }
    auto model = idist::auto_model(std::make_shared<torch::nn::LinearImpl>(4, 2));
    if (model->forward(torch::ones({1, 4})).size(1) != 2) {
      std::fprintf(stderr, "consumer_torch_only: FAILED: auto_model's forward\n");
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer_torch_only: exception: %s\n", e.what());
    return 2;
  }
  std::printf("consumer_torch_only: all checks passed\n");
  return 0;
}
