#pragma once
// Fashion-MNIST as a torch::data dataset: images as normalised float tensors [1, 28, 28] and labels
// as int64 scalars, held in memory (60 000 training images are 188 MB as float).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "idx_reader.hpp"

namespace fashion_mnist {

/// Mean and standard deviation of the Fashion-MNIST training pixels scaled to [0, 1].
inline constexpr double kPixelMean = 0.2860;
inline constexpr double kPixelStd = 0.3530;

/// The ten Fashion-MNIST classes.
inline constexpr int kNumClasses = 10;

/// One split of Fashion-MNIST in memory, indexable by torch::data samplers.
class FashionMnist : public torch::data::datasets::Dataset<FashionMnist> {
 public:
  /// Which split: the 60 000 training or the 10 000 test images.
  enum class Mode { Train, Test };

  /// Reads `dir`'s IDX gzip files of `mode` (the first `limit` examples when > 0) and normalises the
  /// pixels with kPixelMean / kPixelStd.
  /// @throws DataError naming the file that is missing or corrupt.
  FashionMnist(const std::filesystem::path& dir, Mode mode, std::uint32_t limit = 0) {
    Split split = read_split(dir, mode == Mode::Train ? "train" : "t10k", limit);
    const auto n = std::int64_t(split.images.count);
    images_ = torch::from_blob(split.images.pixels.data(),
                               {n, 1, std::int64_t(split.images.rows), std::int64_t(split.images.cols)}, torch::kUInt8)
                  .to(torch::kFloat32)
                  .div_(255.0)
                  .sub_(kPixelMean)
                  .div_(kPixelStd);
    targets_ = torch::from_blob(split.labels.data(), {n}, torch::kUInt8).to(torch::kInt64);
  }

  /// Example `index`: data [1, 28, 28] float32, target an int64 scalar.
  torch::data::Example<> get(std::size_t index) override {
    return {images_[std::int64_t(index)], targets_[std::int64_t(index)]};
  }

  /// The examples at `indices` stacked (data [B, 1, 28, 28], targets [B]) in one call: what Stack<> makes
  /// of get(i) for each index, which auto_dataloader uses instead of B calls of get().
  torch::data::Example<> get_stacked(c10::ArrayRef<std::size_t> indices) const {
    const torch::Tensor idx = torch::tensor(std::vector<std::int64_t>(indices.begin(), indices.end()));
    return {images_.index_select(0, idx), targets_.index_select(0, idx)};
  }

  /// Number of examples.
  torch::optional<std::size_t> size() const override { return std::size_t(images_.size(0)); }

  /// All images, [N, 1, 28, 28] float32 (normalised).
  const torch::Tensor& images() const { return images_; }
  /// All labels, [N] int64.
  const torch::Tensor& targets() const { return targets_; }

 private:
  torch::Tensor images_;
  torch::Tensor targets_;
};

}  // namespace fashion_mnist
