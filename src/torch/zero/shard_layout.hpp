#pragma once
// Where ZeroRedundancyOptimizer's trainable parameters travel from: one flat buffer holding them grouped
// by owner (group rank 0's shard first, each shard in parameter order), plus this rank's send buffer.
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace idist::detail {

class ShardLayout {
 public:
  /// Lays out the parameters of `params` that require a gradient (one dtype and device); `owners`
  /// gives each one's group rank, `rank` is this rank's. With `views`, each parameter becomes a
  /// view into the flat buffer (its values kept); without, the parameters keep their storage.
  ShardLayout(std::vector<at::Tensor> params, std::vector<int> owners, int rank, int ranks, bool views);

  /// Whether some parameter started or stopped requiring a gradient since the layout was built.
  bool trainability_changed() const;
  /// Builds the layout again for the current trainability (parameters leaving it get storage of
  /// their own).
  void rebuild();

  /// Copies this rank's updated parameters into send().
  void pack();
  /// Copies the other ranks' parameters out of flat() (nothing to do with views).
  void unpack();

  const at::Tensor& send() const noexcept { return send_; }
  const at::Tensor& flat() const noexcept { return flat_; }
  /// Elements of each rank's shard in flat(), in group rank order.
  std::span<const std::size_t> counts() const noexcept { return counts_; }
  /// Whether every rank's shard has the same element count.
  bool equal_counts() const noexcept { return equal_; }
  /// Elements of flat().
  std::size_t total() const noexcept { return total_; }

 private:
  void build();

  std::vector<at::Tensor> params_;
  std::vector<int> owners_;
  int rank_;
  int ranks_;
  bool views_;
  std::vector<bool> trainable_;  // at the last build
  std::vector<bool> in_flat_;    // whose storage is flat_ (views only)
  at::Tensor flat_, send_;
  at::Tensor own_slice_;  // this rank's shard inside flat_
  std::vector<std::size_t> counts_;
  std::size_t total_ = 0;
  bool equal_ = true;
  std::vector<std::pair<at::Tensor, at::Tensor>> own_;     // (parameter, its slot in send_), without views
  std::vector<std::pair<at::Tensor, at::Tensor>> others_;  // (parameter, its slot in flat_), without views
};

}  // namespace idist::detail
