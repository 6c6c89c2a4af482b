// The loaded optimizer state placed on its parameters (see optimizer_state.hpp).
#include "torch/checkpoint/optimizer_state.hpp"

#include <cstddef>
#include <deque>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <ATen/ATen.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/lbfgs.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

namespace idist::checkpoint {
namespace {

using torch::optim::OptimizerParamState;

// The state of parameter `p` in an optimizer's state map, or nullptr. LibTorch keys the map by the
// parameter's TensorImpl: as the pointer printed into a string (1.x) or as the pointer (2.x).
template <class Map>
OptimizerParamState* find_state(Map& state, const at::Tensor& p) {
  c10::TensorImpl* impl = p.unsafeGetTensorImpl();
  typename Map::iterator it;
  if constexpr (std::is_same_v<typename Map::key_type, std::string>) {
    std::ostringstream key;
    key << static_cast<const void*>(impl);
    it = state.find(key.str());
  } else {
    it = state.find(impl);
  }
  return it == state.end() ? nullptr : it->second.get();
}

// Moves tensors onto one parameter's device and dtype, counting those that changed.
class Placer {
 public:
  explicit Placer(const at::Tensor& param) : param_(param) {}

  at::Tensor operator()(const at::Tensor& t) {
    if (!t.defined()) return t;
    at::Tensor placed =
        param_.is_floating_point() ? t.to(param_.device(), param_.scalar_type()) : t.to(param_.device());
    if (!placed.is_same(t)) ++moved;
    return placed;
  }
  template <class Container>
  Container all(const Container& ts) {
    Container out;
    for (const at::Tensor& t : ts) out.push_back((*this)(t));
    return out;
  }

  std::size_t moved = 0;

 private:
  at::Tensor param_;
};

void place(OptimizerParamState& s, Placer& to) {
  if (auto* p = dynamic_cast<torch::optim::SGDParamState*>(&s)) {
    p->momentum_buffer(to(p->momentum_buffer()));
  } else if (auto* p = dynamic_cast<torch::optim::AdamParamState*>(&s)) {
    p->exp_avg(to(p->exp_avg())).exp_avg_sq(to(p->exp_avg_sq())).max_exp_avg_sq(to(p->max_exp_avg_sq()));
  } else if (auto* p = dynamic_cast<torch::optim::AdamWParamState*>(&s)) {
    p->exp_avg(to(p->exp_avg())).exp_avg_sq(to(p->exp_avg_sq())).max_exp_avg_sq(to(p->max_exp_avg_sq()));
  } else if (auto* p = dynamic_cast<torch::optim::AdagradParamState*>(&s)) {
    p->sum(to(p->sum()));
  } else if (auto* p = dynamic_cast<torch::optim::RMSpropParamState*>(&s)) {
    p->square_avg(to(p->square_avg())).momentum_buffer(to(p->momentum_buffer())).grad_avg(to(p->grad_avg()));
  } else if (auto* p = dynamic_cast<torch::optim::LBFGSParamState*>(&s)) {
    p->d(to(p->d())).H_diag(to(p->H_diag())).prev_flat_grad(to(p->prev_flat_grad()));
    p->old_dirs(to.all(p->old_dirs())).old_stps(to.all(p->old_stps())).ro(to.all(p->ro()));
    if (p->al()) p->al(to.all(*p->al()));
  }
}

}  // namespace

OptimizerParamState* state_of(torch::optim::Optimizer& optimizer, const at::Tensor& param) {
  return find_state(optimizer.state(), param);
}

std::size_t place_state_on_parameters(torch::optim::Optimizer& optimizer) {
  torch::NoGradGuard no_grad;
  auto& state = optimizer.state();
  std::size_t moved = 0;
  for (auto& group : optimizer.param_groups())
    for (const at::Tensor& p : group.params()) {
      OptimizerParamState* s = find_state(state, p);
      if (!s) continue;
      Placer to(p);
      place(*s, to);
      moved += to.moved;
    }
  return moved;
}

}  // namespace idist::checkpoint
