#pragma once
// The CNN trained by the example: two convolutions and two linear layers, optionally with batch
// normalization after each of the first three (--sync-bn).
#include <torch/torch.h>

namespace fashion_mnist {

/// conv 5x5 (1 -> 16) + ReLU + max-pool 2 -> conv 5x5 (16 -> 32) + ReLU + max-pool 2 ->
/// linear (32*4*4 -> 128) + ReLU -> linear (128 -> 10). Input [B, 1, 28, 28], output logits [B, 10].
/// With `batch_norm`, a BatchNorm2d follows each convolution and a BatchNorm1d the first linear
/// layer (before the ReLU). Each is held in a one-entry torch::nn::Sequential (bn1, bn2, bn3), so
/// that idist::auto_model(model, {.sync_bn = true}) can replace it by idist::nn::SyncBatchNorm: a
/// member torch::nn::BatchNorm2d could not be replaced (the forward would keep calling it).
/// Held as std::shared_ptr<Net>, the type idist::auto_model takes and returns.
struct Net : torch::nn::Module {
  explicit Net(bool batch_norm = false)
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 5)))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 5)))),
        fc1(register_module("fc1", torch::nn::Linear(32 * 4 * 4, 128))),
        fc2(register_module("fc2", torch::nn::Linear(128, 10))) {
    if (batch_norm) {
      bn1 = register_module("bn1", torch::nn::Sequential(torch::nn::BatchNorm2d(16)));
      bn2 = register_module("bn2", torch::nn::Sequential(torch::nn::BatchNorm2d(32)));
      bn3 = register_module("bn3", torch::nn::Sequential(torch::nn::BatchNorm1d(128)));
    }
  }

  /// Logits [B, 10] of images [B, 1, 28, 28].
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(norm(bn1, conv1->forward(x))), 2);  // [B, 16, 12, 12]
    x = torch::max_pool2d(torch::relu(norm(bn2, conv2->forward(x))), 2);  // [B, 32, 4, 4]
    x = torch::relu(norm(bn3, fc1->forward(x.flatten(1))));
    return fc2->forward(x);
  }

  torch::nn::Conv2d conv1;
  torch::nn::Conv2d conv2;
  torch::nn::Linear fc1;
  torch::nn::Linear fc2;
  torch::nn::Sequential bn1{nullptr};  ///< BatchNorm2d(16) (or SyncBatchNorm), empty without batch norm
  torch::nn::Sequential bn2{nullptr};  ///< BatchNorm2d(32) (or SyncBatchNorm)
  torch::nn::Sequential bn3{nullptr};  ///< BatchNorm1d(128) (or SyncBatchNorm)

 private:
  static torch::Tensor norm(torch::nn::Sequential& bn, const torch::Tensor& x) { return bn ? bn->forward(x) : x; }
};

}  // namespace fashion_mnist
