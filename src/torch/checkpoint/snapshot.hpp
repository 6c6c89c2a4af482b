#pragma once
// Copies of the state a save writes, taken on the training thread so that the background writer
// serializes tensors nobody changes: host buffers reused from one save to the next (no page faults
// after the first), and in-memory copies of LibTorch's optimizers' per-parameter state.
#include <cstddef>
#include <string>
#include <vector>

#include <ATen/Tensor.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

namespace idist::checkpoint {

/// Host copies of tensors, in buffers kept for the next save (matched by order, shape and type).
class SnapshotPool {
 public:
  /// Starts a save: buffers are handed out again from the first.
  void rewind() noexcept { next_ = 0; }
  /// A host copy of `t` (undefined stays undefined). The copy stays valid until the next rewind().
  at::Tensor copy(const at::Tensor& t);

 private:
  std::vector<at::Tensor> buffers_;
  std::size_t next_ = 0;
};

/// Whether `optimizer` is one of LibTorch's own (SGD, Adam, AdamW, Adagrad, RMSprop), whose save()
/// is local and whose state save_optimizer_copy() can copy.
bool is_builtin_optimizer(const torch::optim::Optimizer& optimizer);

/// Writes `optimizer`'s save() into `archive` with its per-parameter state replaced by copies from
/// `pool` (the optimizer is unchanged afterwards). Only for is_builtin_optimizer().
void save_optimizer_copy(torch::optim::Optimizer& optimizer, torch::serialize::OutputArchive& archive,
                         SnapshotPool& pool);

/// The bytes of `archive`, as a 1-D uint8 tensor that owns them.
at::Tensor serialize_to_tensor(torch::serialize::OutputArchive& archive);

}  // namespace idist::checkpoint
