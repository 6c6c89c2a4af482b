#pragma once
// The state and algorithm behind comm_hooks::powersgd (PyTorch's PowerSGDState + powerSGD_hook; the
// algorithm is described with PowerSGDOptions in idist/torch/powersgd_hook.hpp). One instance per
// model: it keys error feedback and warm-start matrices by bucket index.
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include <ATen/ATen.h>

#include "idist/torch/comm_hook.hpp"
#include "idist/torch/powersgd_hook.hpp"

namespace idist::detail {

class PowerSGDState {
 public:
  /// @throws ValueError for invalid options (see PowerSGDOptions).
  explicit PowerSGDState(PowerSGDOptions options);

  /// Iterations (backwards) seen so far; compression runs once iter() >= start_powersgd_iter.
  std::int64_t iter() const noexcept { return iter_; }

  /// Reduces one bucket in place; what the hook calls.
  Work run(GradBucket& bucket);

 private:
  struct Plan;  // one bucket's compression in flight

  void start_q(Plan& plan, int world);
  void finish(Plan& plan, int world);

  PowerSGDOptions opts_;
  std::mt19937_64 rng_;
  std::int64_t iter_ = 0;
  std::map<std::size_t, at::Tensor> error_;
  std::map<std::size_t, at::Tensor> input_copy_;
  std::map<std::size_t, at::Tensor> p_memory_;
  std::map<std::size_t, at::Tensor> q_memory_;
  std::vector<std::shared_ptr<Plan>> pending_;  // buckets launched, their continuation not yet run
};

}  // namespace idist::detail
