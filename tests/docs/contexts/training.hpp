// Context of the fragments of docs/training.md: a model prepared or to be prepared by auto_model, a
// loss, and the tensors the collectives' examples name. The fragments are compiled, not run.
#pragma once

#include <idist/idist.hpp>

#include <cstdint>
#include <memory>
#include <vector>

#define DOCS_PARAMS_training                                                                                        \
  [[maybe_unused]] std::shared_ptr<torch::nn::LinearImpl> model, [[maybe_unused]] torch::Tensor loss,               \
      [[maybe_unused]] torch::Tensor t, [[maybe_unused]] torch::Tensor x,                                           \
      [[maybe_unused]] std::vector<torch::Tensor> chunks, [[maybe_unused]] std::vector<std::int64_t> output_splits, \
      [[maybe_unused]] std::vector<std::int64_t> input_splits
