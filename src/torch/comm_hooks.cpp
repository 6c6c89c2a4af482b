// The built-in communication hooks (idist/torch/comm_hooks.hpp).
#include "idist/torch/comm_hooks.hpp"

#include <map>
#include <memory>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "idist/context.hpp"
#include "idist/torch/collectives.hpp"
#include "torch/allreduce_hook.hpp"
#include "torch/layout_free_hook.hpp"
#include "torch/powersgd.hpp"

namespace idist::comm_hooks {

namespace {

// All-reduces `bucket` averaged over the world, in place (PyTorch's allreduce_hook).
Work allreduce_bucket(const at::Tensor& bucket) {
  {
    at::NoGradGuard no_grad;
    bucket.div_(get_world_size());
  }
  return detail::AllreduceHook::launch(bucket, Completion::Async);
}

// The wire buffers of a compressing hook, one per bucket index, kept across iterations: a fresh
// tensor per bucket and step costs more in page faults than the cast itself.
class WireBuffers {
 public:
  // A buffer of `like`'s shape in `wire`; reused while the bucket keeps its size (a rebuild of the
  // buckets changes it). A bucket's buffer is reused only after its previous Work completed.
  at::Tensor get(std::size_t index, const at::Tensor& like, at::ScalarType wire) {
    at::Tensor& b = buffers_[index];
    if (!b.defined() || b.numel() != like.numel() || b.scalar_type() != wire || b.device() != like.device())
      b = at::empty(like.sizes(), like.options().dtype(wire));
    return b;
  }

 private:
  std::map<std::size_t, at::Tensor> buffers_;
};

// Casts the bucket to `wire` (divided by the world size first, as PyTorch does to keep the sum in
// range), all-reduces the copy and casts the sum back into the bucket.
Work compressed_allreduce(GradBucket& bucket, at::ScalarType wire, WireBuffers& buffers) {
  const at::Tensor& input = bucket.buffer();
  if (!at::isFloatingType(input.scalar_type()) || input.scalar_type() == wire) return allreduce_bucket(input);
  at::Tensor compressed = buffers.get(bucket.index(), input, wire);
  {
    at::NoGradGuard no_grad;
    // Cast and pre-divide in one pass (a float product rounded once into the wire type).
    at::mul_out(compressed, input, at::scalar_tensor(1.0 / get_world_size(), input.options()));
  }
  return all_reduce_async(compressed, ReduceOp::Sum).then([input, compressed] {
    at::NoGradGuard no_grad;
    input.copy_(compressed);
  });
}

}  // namespace

CommHook allreduce() { return detail::AllreduceHook{}; }

CommHook fp16_compress() {
  auto buffers = std::make_shared<WireBuffers>();
  return detail::LayoutFreeHook{
      [buffers](GradBucket& bucket) { return compressed_allreduce(bucket, at::kHalf, *buffers); }};
}

CommHook bf16_compress() {
  auto buffers = std::make_shared<WireBuffers>();
  return detail::LayoutFreeHook{
      [buffers](GradBucket& bucket) { return compressed_allreduce(bucket, at::kBFloat16, *buffers); }};
}

CommHook powersgd(const PowerSGDOptions& options) {
  auto state = std::make_shared<detail::PowerSGDState>(options);
  return [state](GradBucket& bucket) { return state->run(bucket); };
}

}  // namespace idist::comm_hooks

namespace idist::detail {

Work AllreduceHook::operator()(GradBucket& bucket) const { return comm_hooks::allreduce_bucket(bucket.buffer()); }

}  // namespace idist::detail
