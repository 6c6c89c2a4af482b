// Context of docs/fault-tolerance.md's resumable program: its model, training set, checkpoint
// directory, epoch count, save interval and step function. The fragment is compiled, not run.
#pragma once

#include <idist/idist.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>

namespace docs_ctx_resumable {

struct Net : torch::nn::Module {
  torch::nn::Linear fc{register_module("fc", torch::nn::Linear(4, 2))};
  torch::Tensor forward(const torch::Tensor& x) { return fc(x); }
};

// A map-style dataset of (input, target) examples, batched with Stack<>.
struct Examples : torch::data::datasets::Dataset<Examples> {
  torch::data::Example<> get(std::size_t i) override {
    return {torch::full({4}, static_cast<double>(i)), torch::tensor(static_cast<std::int64_t>(i % 2))};
  }
  torch::optional<std::size_t> size() const override { return 8; }
};
using TrainSet = torch::data::datasets::MapDataset<Examples, torch::data::transforms::Stack<>>;

// Any callable taking a batch.
struct TrainStep {
  template <class Batch>
  void operator()(Batch&) const {}
};

}  // namespace docs_ctx_resumable

#define DOCS_PARAMS_resumable                                                             \
  [[maybe_unused]] TrainSet train_set, [[maybe_unused]] const std::filesystem::path &dir, \
      [[maybe_unused]] std::uint64_t epochs, [[maybe_unused]] std::uint64_t every,        \
      [[maybe_unused]] const TrainStep &train_step
