#pragma once
/// @file
/// Communication hooks of auto_model: what a hook receives (GradBucket) and its type (CommHook: it
/// returns an idist::Work that yields the reduced bucket). Mirrors DistributedDataParallel.
/// register_comm_hook's contract (torch.distributed.GradBucket, a hook returning
/// torch.futures.Future[Tensor]); auto_model's own all-reduce is such a hook. The built-in hooks are in
/// idist/torch/comm_hooks.hpp; idist::register_comm_hook is in idist/torch/auto_model.hpp.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "idist/work.hpp"

namespace idist {

/// One bucket of gradients, handed to a communication hook during backward (torch's GradBucket).
///
/// buffer() is the bucket's flat, 1-D gradient tensor: the gradients of parameters(), in that order,
/// at offsets(). With a hook registered, the gradients are the ones this rank computed, not divided
/// by the world size (the hook averages, as PyTorch's hooks do). The hook may reduce in place or
/// return another tensor of the same size and dtype, which is copied into the bucket.
class GradBucket {
 public:
  /// Built by the reducer. `params` and `offsets` (elements into `buffer`) have one entry per
  /// parameter; `last` marks the last bucket of the backward.
  GradBucket(std::size_t index, at::Tensor buffer, std::vector<at::Tensor> params, std::vector<std::int64_t> offsets,
             bool last)
      : index_(index),
        buffer_(std::move(buffer)),
        params_(std::move(params)),
        offsets_(std::move(offsets)),
        last_(last) {}

  /// Position of the bucket in launch order (0 is the first bucket of every backward). Stable across
  /// iterations, so hooks can keep per-bucket state (PowerSGD's error feedback) keyed by it.
  std::size_t index() const noexcept { return index_; }
  /// The flat gradient tensor, shape [total elements], the parameters' dtype and device.
  const at::Tensor& buffer() const noexcept { return buffer_; }
  /// The parameters whose gradients the bucket holds, in buffer order.
  const std::vector<at::Tensor>& parameters() const noexcept { return params_; }
  /// Offset of each parameter's gradient in buffer(), in elements.
  const std::vector<std::int64_t>& offsets() const noexcept { return offsets_; }
  /// Each parameter's gradient as a view of buffer(), shaped like the parameter (torch's
  /// GradBucket.gradients()).
  std::vector<at::Tensor> gradients() const {
    std::vector<at::Tensor> out;
    out.reserve(params_.size());
    for (std::size_t i = 0; i < params_.size(); ++i)
      out.push_back(buffer_.narrow(0, offsets_[i], params_[i].numel()).view(params_[i].sizes()));
    return out;
  }
  /// Whether this is the last bucket of the backward (torch's GradBucket.is_last()).
  bool is_last() const noexcept { return last_; }

 private:
  std::size_t index_;
  at::Tensor buffer_;
  std::vector<at::Tensor> params_;
  std::vector<std::int64_t> offsets_;
  bool last_;
};

/// A communication hook: called once per bucket and backward, in bucket order, on every rank, when
/// the bucket's gradients are all in; launches the bucket's reduction and returns its idist::Work (the
/// C++ form of the torch.futures.Future[Tensor] a Python hook returns). Once that Work completes the
/// bucket holds the reduced gradients: in place (a Work without a value, e.g. the one
/// all_reduce_async(bucket.buffer()) returns), or as the Work's value (Work::then() with a function
/// returning a tensor, Work::ready()): a tensor of the bucket's size and dtype, copied into the bucket.
/// The same collectives must be issued in the same order on every rank. State (PowerSGD's matrices)
/// lives in the callable, as a captured object (PyTorch passes it as the hook's `state` argument).
///
///     idist::register_comm_hook(model, [](idist::GradBucket& b) {
///       b.buffer().div_(idist::get_world_size());
///       return idist::all_reduce_async(b.buffer());
///     });
using CommHook = std::function<Work(GradBucket&)>;

}  // namespace idist
