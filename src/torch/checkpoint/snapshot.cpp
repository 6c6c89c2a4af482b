#include "torch/checkpoint/snapshot.hpp"

#include <memory>
#include <stdexcept>
#include <type_traits>
#include <typeinfo>
#include <utility>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

namespace idist::checkpoint {
namespace {

using torch::optim::OptimizerParamState;

std::unique_ptr<OptimizerParamState> copy_state(const OptimizerParamState& s, SnapshotPool& pool) {
  if (const auto* p = dynamic_cast<const torch::optim::SGDParamState*>(&s)) {
    auto c = std::make_unique<torch::optim::SGDParamState>(*p);
    c->momentum_buffer(pool.copy(p->momentum_buffer()));
    return c;
  }
  if (const auto* p = dynamic_cast<const torch::optim::AdamParamState*>(&s)) {
    auto c = std::make_unique<torch::optim::AdamParamState>(*p);
    c->exp_avg(pool.copy(p->exp_avg())).exp_avg_sq(pool.copy(p->exp_avg_sq()));
    c->max_exp_avg_sq(pool.copy(p->max_exp_avg_sq()));
    return c;
  }
  if (const auto* p = dynamic_cast<const torch::optim::AdamWParamState*>(&s)) {
    auto c = std::make_unique<torch::optim::AdamWParamState>(*p);
    c->exp_avg(pool.copy(p->exp_avg())).exp_avg_sq(pool.copy(p->exp_avg_sq()));
    c->max_exp_avg_sq(pool.copy(p->max_exp_avg_sq()));
    return c;
  }
  if (const auto* p = dynamic_cast<const torch::optim::AdagradParamState*>(&s)) {
    auto c = std::make_unique<torch::optim::AdagradParamState>(*p);
    c->sum(pool.copy(p->sum()));
    return c;
  }
  if (const auto* p = dynamic_cast<const torch::optim::RMSpropParamState*>(&s)) {
    auto c = std::make_unique<torch::optim::RMSpropParamState>(*p);
    c->square_avg(pool.copy(p->square_avg())).momentum_buffer(pool.copy(p->momentum_buffer()));
    c->grad_avg(pool.copy(p->grad_avg()));
    return c;
  }
  throw std::logic_error(fmt::format("no in-memory copy for optimizer state {}", typeid(s).name()));
}

}  // namespace

at::Tensor SnapshotPool::copy(const at::Tensor& t) {
  if (!t.defined()) return t;
  torch::NoGradGuard no_grad;
  const at::Tensor src = t.detach();
  if (src.layout() != at::kStrided) return src.to(at::kCPU, /*non_blocking=*/false, /*copy=*/true);
  if (next_ < buffers_.size()) {
    at::Tensor& b = buffers_[next_];
    if (b.sizes() == src.sizes() && b.scalar_type() == src.scalar_type()) {
      b.copy_(src);
      ++next_;
      return b;
    }
  }
  at::Tensor b = at::empty(src.sizes(), src.options().device(at::kCPU).requires_grad(false));
  b.copy_(src);
  if (next_ < buffers_.size())
    buffers_[next_] = b;
  else
    buffers_.push_back(b);
  ++next_;
  return b;
}

bool is_builtin_optimizer(const torch::optim::Optimizer& optimizer) {
  const std::type_info& t = typeid(optimizer);
  return t == typeid(torch::optim::SGD) || t == typeid(torch::optim::Adam) || t == typeid(torch::optim::AdamW) ||
         t == typeid(torch::optim::Adagrad) || t == typeid(torch::optim::RMSprop);
}

void save_optimizer_copy(torch::optim::Optimizer& optimizer, torch::serialize::OutputArchive& archive,
                         SnapshotPool& pool) {
  auto& live = optimizer.state();
  std::remove_reference_t<decltype(live)> copy;
  for (const auto& [key, state] : live) copy.emplace(key, copy_state(*state, pool));
  // save() writes references to the state's tensors: let it see the copies.
  std::swap(live, copy);
  try {
    optimizer.save(archive);
  } catch (...) {
    std::swap(live, copy);
    throw;
  }
  std::swap(live, copy);
}

at::Tensor serialize_to_tensor(torch::serialize::OutputArchive& archive) {
  auto bytes = std::make_unique<std::string>();
  archive.save_to([&bytes](const void* data, std::size_t size) {
    bytes->append(static_cast<const char*>(data), size);
    return size;
  });
  std::string* raw = bytes.get();
  at::Tensor t = at::from_blob(
      raw->data(), {std::int64_t(raw->size())}, [raw](void*) { delete raw; }, at::TensorOptions().dtype(at::kByte));
  bytes.release();
  return t;
}

}  // namespace idist::checkpoint
