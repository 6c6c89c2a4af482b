#pragma once
// The CNN trained by the example: two convolutions and two linear layers.
#include <torch/torch.h>

namespace fashion_mnist {

/// conv 5x5 (1 -> 16) + ReLU + max-pool 2 -> conv 5x5 (16 -> 32) + ReLU + max-pool 2 ->
/// linear (32*4*4 -> 128) + ReLU -> linear (128 -> 10). Input [B, 1, 28, 28], output logits [B, 10].
/// Held as std::shared_ptr<Net>, the type idist::auto_model takes and returns.
struct Net : torch::nn::Module {
  Net()
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 5)))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 5)))),
        fc1(register_module("fc1", torch::nn::Linear(32 * 4 * 4, 128))),
        fc2(register_module("fc2", torch::nn::Linear(128, 10))) {}

  /// Logits [B, 10] of images [B, 1, 28, 28].
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(conv1->forward(x)), 2);  // [B, 16, 12, 12]
    x = torch::max_pool2d(torch::relu(conv2->forward(x)), 2);  // [B, 32, 4, 4]
    x = torch::relu(fc1->forward(x.flatten(1)));
    return fc2->forward(x);
  }

  torch::nn::Conv2d conv1;
  torch::nn::Conv2d conv2;
  torch::nn::Linear fc1;
  torch::nn::Linear fc2;
};

}  // namespace fashion_mnist
