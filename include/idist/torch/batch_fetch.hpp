#pragma once
/// @file
/// The batch fetch path of auto_dataloader: a stacked batch taken from the dataset in one call
/// (index_select on stacked tensors) instead of per-example get() and LibTorch's Stack collation.

#include <concepts>
#include <cstddef>
#include <type_traits>
#include <utility>

#include <ATen/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <torch/data/datasets.h>
#include <torch/data/transforms.h>

namespace idist {

/// A map-style dataset that can also return a whole batch, already stacked, in one call:
/// `get_stacked(indices)` (const) returns what `torch::data::transforms::Stack<>` would make of
/// `get(i)` for each index in order (same values, dtypes and shapes; e.g. `index_select(0, indices)` on
/// tensors that hold all the examples stacked). auto_dataloader then fetches each batch of
/// `dataset.map(Stack<>())` with one get_stacked call. LibTorch's TensorDataset is served this way
/// without the member. No PyTorch counterpart: there, a Dataset's `__getitems__` plays this part.
template <class D>
concept StackedBatchDataset = requires(const D& d, c10::ArrayRef<std::size_t> indices) {
  { d.get_stacked(indices) } -> std::convertible_to<typename D::ExampleType>;
};

namespace detail {

/// `indices` as an int64 tensor [indices.size()] (for index_select).
at::Tensor index_tensor(c10::ArrayRef<std::size_t> indices);

/// Whether `D` is `MapDataset<Source, Stack<Example>>` (Stack as the only transform); then Source is its source.
template <class D>
struct StackedMap : std::false_type {};
/// The specialisation that matches.
template <class S, class E>
struct StackedMap<torch::data::datasets::MapDataset<S, torch::data::transforms::Stack<E>>> : std::true_type {
  using Source = S;  ///< the dataset whose examples are stacked
};

/// Whether auto_dataloader can fetch `D`'s batches in one call from its source.
template <class D>
constexpr bool fetches_whole_batches() {
  if constexpr (StackedMap<D>::value) {
    using S = typename StackedMap<D>::Source;
    return StackedBatchDataset<S> || std::same_as<S, torch::data::datasets::TensorDataset>;
  } else {
    return false;
  }
}

/// The dataset auto_dataloader's LibTorch loader draws from: `Dataset` itself, except that a batch of a
/// stacked map over a StackedBatchDataset or a TensorDataset is taken in one call (bitwise the batch
/// that get() and Stack would make).
template <class Dataset>
class BatchFetch final : public torch::data::datasets::BatchDataset<BatchFetch<Dataset>, typename Dataset::BatchType> {
 public:
  /// One batch, as `Dataset` returns it.
  using BatchType = typename Dataset::BatchType;

  /// Wraps `dataset`.
  explicit BatchFetch(Dataset dataset) : dataset_(std::move(dataset)) {}

  /// The batch of the examples at `indices`, in that order.
  BatchType get_batch(c10::ArrayRef<std::size_t> indices) override {
    if constexpr (fetches_whole_batches<Dataset>()) {
      const auto& source = dataset_.dataset();
      if constexpr (StackedBatchDataset<std::decay_t<decltype(source)>>)
        return source.get_stacked(indices);
      else
        return source.tensor.index_select(0, index_tensor(indices));
    } else {
      return dataset_.get_batch(indices);
    }
  }

  /// The dataset's size.
  torch::optional<std::size_t> size() const override { return dataset_.size(); }

 private:
  Dataset dataset_;
};

}  // namespace detail
}  // namespace idist
