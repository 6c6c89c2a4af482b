// The Reducer's public surface (idist/torch/reducer.hpp) over its implementation (reducer_impl.hpp).
// Accessors read the state under the reducer's lock, as the hooks write it.
#include "torch/reducer.hpp"

#include <mutex>
#include <utility>

#include "idist/error.hpp"
#include "torch/allreduce_hook.hpp"
#include "torch/layout_free_hook.hpp"
#include "torch/reducer_impl.hpp"

namespace idist::detail {

std::shared_ptr<Reducer> Reducer::create(std::shared_ptr<torch::nn::Module> module, Options opts) {
  auto impl = std::make_shared<ReducerImpl>(module, opts);
  impl->install_hooks();  // after make_shared: the hooks hold weak references to impl
  return std::shared_ptr<Reducer>(new Reducer(std::move(impl)));
}

Reducer::Reducer(std::shared_ptr<ReducerImpl> impl) : impl_(std::move(impl)) {}
Reducer::~Reducer() = default;

bool Reducer::require_sync() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->require_sync_;
}

void Reducer::set_require_sync(bool on) {
  std::lock_guard lock(impl_->mutex_);
  impl_->require_sync_ = on;
}

std::vector<std::vector<std::size_t>> Reducer::buckets() const {
  std::vector<std::vector<std::size_t>> out;
  for (const auto& b : impl_->buckets_) out.push_back(b.params);
  return out;
}

std::vector<std::size_t> Reducer::bucket_bytes() const {
  std::vector<std::size_t> out;
  for (const auto& b : impl_->buckets_) out.push_back(std::size_t(b.flat.numel()) * b.flat.element_size());
  return out;
}

const std::vector<std::string>& Reducer::param_names() const noexcept { return impl_->names_; }

std::size_t Reducer::sync_count() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->sync_count_;
}

std::size_t Reducer::peak_in_flight() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->peak_in_flight_;
}

bool Reducer::gradient_in_bucket(std::size_t i) const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->is_slot_alias(i);
}

void Reducer::register_comm_hook(CommHook hook) {
  std::lock_guard lock(impl_->mutex_);
  if (!hook) throw ValueError("register_comm_hook: the hook is empty; expected a callable");
  if (impl_->user_hook_)
    throw ValueError(
        "register_comm_hook: a communication hook is already registered on this model; it can be "
        "registered only once (as in DistributedDataParallel)");
  if (impl_->in_backward_)
    throw ValueError("register_comm_hook: called during a backward; register it before training");
  if (!is_layout_free(hook)) impl_->stop_autotune();  // its state may be per bucket
  impl_->allreduce_hook_ = as_allreduce_hook(hook) != nullptr;
  impl_->comm_hook_ = std::move(hook);
  impl_->user_hook_ = true;
}

double Reducer::bucket_cap_mb() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->cap_mb_;
}

bool Reducer::tuning_bucket_cap() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->tune_.active;
}

std::vector<std::size_t> Reducer::launch_positions() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->launch_positions_;
}

bool Reducer::buckets_rebuilt() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->rebuilt_;
}

std::size_t Reducer::early_launches() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->early_launches_;
}

void Reducer::set_join_tick(std::function<JoinTick()> tick) { impl_->set_join_tick(std::move(tick)); }

bool Reducer::has_join_tick() const {
  std::lock_guard lock(impl_->mutex_);
  return static_cast<bool>(impl_->join_tick_);
}

void Reducer::shadow_backward(int buffer_src) { impl_->shadow_backward(buffer_src); }

}  // namespace idist::detail
