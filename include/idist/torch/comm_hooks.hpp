#pragma once
/// @file
/// Built-in communication hooks for idist::register_comm_hook (torch.distributed.algorithms.
/// ddp_comm_hooks): allreduce (auto_model's default behaviour, as a hook), fp16_compress and
/// bf16_compress (all-reduce a half-width copy of the bucket), and powersgd (low-rank compression,
/// idist/torch/powersgd_hook.hpp).
///
/// bfloat16: every idist backend reduces it — mpi and gloo with idist's own reduction functions
/// (summed in float32 per element pair, rounded back), nccl natively (NCCL >= 2.10, else staged
/// through the host) — so bf16_compress needs no fallback on a backend; a bucket that is not
/// floating point is all-reduced uncompressed.

#include <ATen/ATen.h>

#include <map>
#include <memory>

#include "idist/context.hpp"
#include "idist/torch/collectives.hpp"
#include "idist/torch/comm_hook.hpp"
#include "idist/torch/powersgd_hook.hpp"

namespace idist::comm_hooks {

namespace detail {

/// All-reduces `bucket` averaged over the world, in place (PyTorch's allreduce_hook).
inline BucketFuture allreduce_bucket(const at::Tensor& bucket) {
  {
    at::NoGradGuard no_grad;
    bucket.div_(get_world_size());
  }
  Work work = all_reduce_async(bucket, ReduceOp::Sum);
  return BucketFuture(std::move(work), [bucket] { return bucket; });
}

/// The wire buffers of a compressing hook, one per bucket index, kept across iterations: a fresh
/// tensor per bucket and step costs more in page faults than the cast itself.
class WireBuffers {
 public:
  /// A buffer of `like`'s shape in `wire`; reused while the bucket keeps its size (a rebuild of the
  /// buckets changes it). A bucket's buffer is reused only after its previous future completed.
  at::Tensor get(std::size_t index, const at::Tensor& like, at::ScalarType wire) {
    at::Tensor& b = buffers_[index];
    if (!b.defined() || b.numel() != like.numel() || b.scalar_type() != wire || b.device() != like.device())
      b = at::empty(like.sizes(), like.options().dtype(wire));
    return b;
  }

 private:
  std::map<std::size_t, at::Tensor> buffers_;
};

/// Casts the bucket to `wire` (divided by the world size first, as PyTorch does to keep the sum
/// in range), all-reduces the copy and casts the sum back into the bucket.
inline BucketFuture compressed_allreduce(GradBucket& bucket, at::ScalarType wire, WireBuffers& buffers) {
  const at::Tensor& input = bucket.buffer();
  if (!at::isFloatingType(input.scalar_type()) || input.scalar_type() == wire) return allreduce_bucket(input);
  at::Tensor compressed = buffers.get(bucket.index(), input, wire);
  {
    at::NoGradGuard no_grad;
    // Cast and pre-divide in one pass (a float product rounded once into the wire type).
    at::mul_out(compressed, input, at::scalar_tensor(1.0 / get_world_size(), input.options()));
  }
  Work work = all_reduce_async(compressed, ReduceOp::Sum);
  return BucketFuture(std::move(work), [input, compressed] {
    at::NoGradGuard no_grad;
    input.copy_(compressed);
    return input;
  });
}

}  // namespace detail

/// All-reduces each bucket and divides by the world size: what auto_model does without a hook
/// (torch.distributed.algorithms.ddp_comm_hooks.default_hooks.allreduce_hook). Useful as a
/// baseline, or to wrap.
inline CommHook allreduce() {
  return [](GradBucket& bucket) { return detail::allreduce_bucket(bucket.buffer()); };
}

/// Halves the bytes on the wire: the bucket is cast to float16 (after dividing by the world size),
/// all-reduced, and cast back (default_hooks.fp16_compress_hook). float16 keeps 11 significant
/// bits and overflows past 65504: fine for gradients of ordinary scale. The hook owns one wire
/// buffer per bucket, reused every iteration: register one hook per model.
inline CommHook fp16_compress() {
  auto buffers = std::make_shared<detail::WireBuffers>();
  return [buffers](GradBucket& bucket) { return detail::compressed_allreduce(bucket, at::kHalf, *buffers); };
}

/// As fp16_compress with bfloat16 (default_hooks.bf16_compress_hook): float32's range, 8
/// significant bits. Every idist backend reduces bfloat16 (see the file comment). One hook per
/// model, as fp16_compress.
inline CommHook bf16_compress() {
  auto buffers = std::make_shared<detail::WireBuffers>();
  return [buffers](GradBucket& bucket) { return detail::compressed_allreduce(bucket, at::kBFloat16, *buffers); };
}

/// PowerSGD gradient compression (powerSGD_hook.powerSGD_hook; Vogels et al., NeurIPS 2019):
/// each gradient matrix of n x m elements is sent as two rank-r factors of (n + m) x r elements.
/// See PowerSGDOptions and idist/torch/powersgd_hook.hpp. The returned hook owns its state (error
/// feedback, warm-start matrices, iteration count): register one hook per model.
inline CommHook powersgd(const PowerSGDOptions& options = {}) {
  auto state = std::make_shared<PowerSGDState>(options);
  return [state](GradBucket& bucket) { return state->run(bucket); };
}

}  // namespace idist::comm_hooks
