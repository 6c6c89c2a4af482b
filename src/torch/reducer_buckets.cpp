// The Reducer's layout: parameters, buckets, slots and the gradients that alias them.
#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <utility>

#include <fmt/format.h>

#include "idist/context.hpp"
#include "idist/error.hpp"
#include "idist/torch/collectives.hpp"
#include "idist/torch/comm_hooks.hpp"
#include "idist/torch/dtype.hpp"
#include "torch/bucket_assignment.hpp"
#include "torch/comm/comm.hpp"
#include "torch/reducer_impl.hpp"

namespace idist::detail {

ReducerImpl::ReducerImpl(const std::shared_ptr<torch::nn::Module>& module, Options opts) : opts_(opts) {
  if (!module) throw ValueError("Reducer: module is null");
  if (opts_.bucket_cap_mb && !(*opts_.bucket_cap_mb > 0))
    throw ValueError(fmt::format("auto_model: bucket_cap_mb should be positive, but given {}", *opts_.bucket_cap_mb));
  cap_mb_ = opts_.bucket_cap_mb.value_or(kDefaultBucketCapMb);
  world_size_ = get_world_size();
  // The default hook. Without asynchronous progress nothing would advance in the background, so each
  // bucket runs at once through the backend's blocking path (MPI_Allreduce by default, whose
  // large-message algorithms beat the non-blocking ones); one bucket in flight also bounds the
  // backend's scratch memory.
  comm_hook_ = comm_hooks::allreduce();
  allreduce_hook_ = true;
  bucket_completion_ = comm::bucket_completion();
  world_size_tensor_ = at::scalar_tensor(double(world_size_), at::kDouble);

  // Parameters that need a gradient, once each (a shared parameter is registered under
  // several names), in registration order.
  std::unordered_set<const void*> seen;
  for (const auto& item : module->named_parameters(/*recurse=*/true)) {
    const at::Tensor& p = item.value();
    if (!p.requires_grad() || !seen.insert(p.unsafeGetTensorImpl()).second) continue;
    to_dtype(p.scalar_type());
    params_.push_back(p);
    names_.push_back(item.key());
  }
  for (const auto& item : module->named_buffers(/*recurse=*/true)) buffers_.push_back(item.value());

  std::vector<std::size_t> reverse(params_.size());
  for (std::size_t k = 0; k < reverse.size(); ++k) reverse[k] = reverse.size() - 1 - k;
  order_ = reverse;
  build_buckets(reverse);
  start_autotune();
  ready_.assign(params_.size(), false);
  used_.assign(params_.size(), 0);
  static_unused_.assign(params_.size(), false);
}

std::vector<std::vector<std::size_t>> ReducerImpl::layout(const std::vector<std::size_t>& order, double cap_mb) const {
  std::vector<std::size_t> bytes;
  std::vector<std::string> keys;
  for (const auto& p : params_) {
    bytes.push_back(std::size_t(p.numel()) * p.element_size());
    keys.push_back(std::string(c10::toString(p.scalar_type())) + "@" + p.device().str());
  }
  const double mib = 1024.0 * 1024.0;
  const auto cap = std::size_t(std::max(1.0, cap_mb * mib));
  const auto first = std::min(cap, std::size_t(std::max(1.0, opts_.first_bucket_cap_mb * mib)));
  return assign_buckets_in_order(order, bytes, keys, first, cap);
}

void ReducerImpl::build_buckets(const std::vector<std::size_t>& order) {
  std::vector<bool> aliased(params_.size(), false);
  for (std::size_t i = 0; i < views_.size(); ++i) aliased[i] = is_slot_alias(i);
  std::vector<at::Tensor> old_views = std::move(views_);
  std::vector<Bucket> buckets;
  std::vector<Slot> slots(params_.size());
  for (auto& indices : layout(order, cap_mb_)) {
    Bucket b;
    std::int64_t offset = 0;
    for (std::size_t i : indices) {
      slots[i] = Slot{buckets.size(), offset, params_[i].numel()};
      offset += params_[i].numel();
    }
    const at::Tensor& p0 = params_[indices.front()];
    b.flat = at::zeros({offset}, p0.options().requires_grad(false));
    b.params = std::move(indices);
    buckets.push_back(std::move(b));
  }
  buckets_ = std::move(buckets);
  slots_ = std::move(slots);
  for (std::size_t k = 0; k < buckets_.size(); ++k) buckets_[k].grad = grad_bucket(k, buckets_[k].flat);
  views_.clear();
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Slot& sl = slots_[i];
    views_.push_back(buckets_[sl.bucket].flat.narrow(0, sl.offset, sl.numel).view(params_[i].sizes()));
  }
  at::NoGradGuard no_grad;
  for (std::size_t i = 0; i < old_views.size(); ++i) {
    views_[i].copy_(old_views[i]);
    if (aliased[i]) params_[i].mutable_grad() = slot_alias(i);
  }
}

std::unique_ptr<GradBucket> ReducerImpl::grad_bucket(std::size_t index, const at::Tensor& flat) const {
  const Bucket& b = buckets_[index];
  std::vector<at::Tensor> params;
  std::vector<std::int64_t> offsets;
  for (std::size_t i : b.params) {
    params.push_back(params_[i]);
    offsets.push_back(slots_[i].offset);
  }
  return std::make_unique<GradBucket>(index, flat, std::move(params), std::move(offsets), index + 1 == buckets_.size());
}

void ReducerImpl::rebuild_in_ready_order() {
  std::vector<std::int64_t> order;
  std::vector<bool> listed(params_.size(), false);
  for (std::size_t i : ready_order_)
    if (!listed[i]) {
      order.push_back(std::int64_t(i));
      listed[i] = true;
    }
  for (std::size_t k = params_.size(); k-- > 0;)
    if (!listed[k]) order.push_back(std::int64_t(k));
  at::Tensor t = at::tensor(at::ArrayRef<std::int64_t>(order), at::kLong);
  idist::broadcast(t, 0);
  const std::int64_t* o = t.data_ptr<std::int64_t>();
  order_.assign(o, o + t.numel());
  build_buckets(order_);
  rebuilt_ = true;
  ready_order_.clear();
}

bool ReducerImpl::is_slot_alias(std::size_t i) const {
  const at::Tensor& g = params_[i].grad();
  return g.defined() && !g.is_sparse() && g.data_ptr() == views_[i].data_ptr() && g.numel() == views_[i].numel();
}

at::Tensor ReducerImpl::slot_alias(std::size_t i) const {
  const Slot& s = slots_[i];
  const at::Tensor& flat = buckets_[s.bucket].flat;
  at::Tensor g = at::empty({0}, flat.options());
  g.set_(flat.storage(), flat.storage_offset() + s.offset, params_[i].sizes());
  return g;
}

}  // namespace idist::detail
