#pragma once
// The models of the training benchmark and their synthetic batches.
#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace idist_bench {

/// A model and one synthetic batch for it.
struct Workload {
  torch::nn::Sequential model{nullptr};
  torch::Tensor input;   ///< batch of inputs
  torch::Tensor target;  ///< class indices for cross-entropy
};

/// Names accepted by make_workload: "cnn" (the Fashion-MNIST CNN of examples/fashion_mnist: two
/// conv, two linear, 28x28 inputs), "mlp32x512" (32 Linear layers 512 -> 512), "mlp200x64" (200 Linear layers 64 ->
/// 64).
const std::vector<std::string>& model_names();

/// Default per-rank batch size of a model.
std::int64_t default_batch(const std::string& name);

/// Builds model `name` with parameters drawn from `seed` (the same on every rank) and a batch of
/// `batch` samples drawn from `data_seed` (different per rank, as real data-parallel shards are).
/// @throws std::invalid_argument for an unknown name.
Workload make_workload(const std::string& name, std::int64_t batch, std::uint64_t seed, std::uint64_t data_seed);

/// Bytes of the gradients of `model` (sum over parameters that require a gradient).
std::size_t gradient_bytes(const torch::nn::Module& model);

}  // namespace idist_bench
