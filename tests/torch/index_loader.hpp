#pragma once
// Data loaders over a dataset whose examples are their own index: the checkpoint tests resume them and
// compare the indices each rank sees with an order computed independently.
#include <cstddef>
#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace idist::test {

/// A dataset of `n` examples; example i is an int64 tensor of shape [1] holding i.
inline auto index_dataset(std::int64_t n) {
  return torch::data::datasets::TensorDataset(torch::arange(n, torch::kLong).reshape({n, 1}))
      .map(torch::data::transforms::Stack<torch::data::TensorExample>());
}

/// The indices `loader` yields, in order, over at most `max_batches` batches (every batch by default).
template <class Loader>
std::vector<std::int64_t> read_indices(Loader& loader, std::size_t max_batches = SIZE_MAX) {
  std::vector<std::int64_t> out;
  std::size_t n = 0;
  for (auto& batch : loader) {
    for (std::int64_t i = 0; i < batch.data.size(0); ++i) out.push_back(batch.data[i][0].template item<std::int64_t>());
    if (++n == max_batches) break;
  }
  return out;
}

}  // namespace idist::test
