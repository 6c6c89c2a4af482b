#include "training/models.hpp"

#include <stdexcept>

namespace idist_bench {

namespace {

namespace nn = torch::nn;

// The Fashion-MNIST CNN of examples/fashion_mnist: conv 5x5 1->16, ReLU, max-pool 2, conv 5x5
// 16->32, ReLU, max-pool 2, linear 512->128, ReLU, linear 128->10.
nn::Sequential cnn() {
  return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 16, 5)), nn::ReLU(), nn::MaxPool2d(2),
                        nn::Conv2d(nn::Conv2dOptions(16, 32, 5)), nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(),
                        nn::Linear(32 * 4 * 4, 128), nn::ReLU(), nn::Linear(128, 10));
}

// `depth` Linear layers width -> width with ReLU between them: many parameter tensors.
nn::Sequential mlp(int depth, std::int64_t width) {
  nn::Sequential s;
  for (int i = 0; i < depth; ++i) {
    s->push_back(nn::Linear(width, width));
    if (i + 1 < depth) s->push_back(nn::ReLU());
  }
  return s;
}

}  // namespace

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names{"cnn", "mlp32x512", "mlp200x64"};
  return names;
}

// The example's global batch of 64 split over 2 ranks; the MLPs get a small per-rank batch, so that
// with Debian's reference BLAS a step takes a few hundred milliseconds (the regime of the issue's
// prototype measurements) rather than seconds.
std::int64_t default_batch(const std::string& name) {
  if (name == "cnn") return 32;
  return 16;
}

Workload make_workload(const std::string& name, std::int64_t batch, std::uint64_t seed, std::uint64_t data_seed) {
  Workload w;
  torch::manual_seed(seed);
  std::int64_t classes = 0;
  std::vector<std::int64_t> shape{batch};
  if (name == "cnn") {
    w.model = cnn();
    classes = 10;
    shape.insert(shape.end(), {1, 28, 28});
  } else if (name == "mlp32x512") {
    w.model = mlp(32, 512);
    classes = 512;
    shape.push_back(512);
  } else if (name == "mlp200x64") {
    w.model = mlp(200, 64);
    classes = 64;
    shape.push_back(64);
  } else {
    throw std::invalid_argument("unknown model '" + name + "'; expected cnn, mlp32x512 or mlp200x64");
  }
  torch::manual_seed(data_seed);
  w.input = torch::randn(shape);
  w.target = torch::randint(0, classes, {batch}, torch::kLong);
  return w;
}

std::size_t gradient_bytes(const torch::nn::Module& model) {
  std::size_t bytes = 0;
  for (const auto& p : model.parameters(true))
    if (p.requires_grad()) bytes += std::size_t(p.numel()) * p.element_size();
  return bytes;
}

}  // namespace idist_bench
