// PowerSGD's state and algorithm (see powersgd.hpp and PowerSGDOptions).
#include "torch/powersgd.hpp"

#include <algorithm>

#include <ATen/core/grad_mode.h>

#include <fmt/format.h>

#include "idist/context.hpp"
#include "idist/error.hpp"
#include "idist/torch/collectives.hpp"

namespace idist::detail {

namespace {

// Gram-Schmidt on the columns of `m` (n x r) in place: each column normalised, then removed from the
// later ones.
void orthogonalize(at::Tensor& m, double epsilon) {
  const std::int64_t cols = m.size(1);
  for (std::int64_t i = 0; i < cols; ++i) {
    at::Tensor col = m.narrow(1, i, 1);
    const at::Tensor norm = at::norm(col);
    if (epsilon == 0.0)
      col.div_(norm);
    else
      col.div_(norm + epsilon);
    if (i + 1 < cols) {
      at::Tensor rest = m.narrow(1, i + 1, cols - i - 1);
      rest.sub_(at::sum(col * rest, 0) * col);
    }
  }
}

}  // namespace

struct PowerSGDState::Plan {
  std::vector<at::Tensor> matrices;      // views of the bucket, n x m
  std::vector<std::int64_t> ranks;       // r per matrix
  std::vector<at::Tensor> uncompressed;  // views of the bucket
  std::vector<at::Tensor> ps, qs;        // views of p_flat / q_flat
  at::Tensor p_flat, q_flat, rest;
  at::Tensor input, input_copy;  // the bucket; its copy before compression (error feedback)
  std::size_t index = 0;
  bool last = false;
  Work p_work, q_work;  // the all-reduce of P and the rest; then of Q
  bool q_started = false;
};

PowerSGDState::PowerSGDState(PowerSGDOptions options) : opts_(options), rng_(options.random_seed) {
  if (opts_.matrix_approximation_rank < 1)
    throw ValueError(fmt::format("powersgd: matrix_approximation_rank should be >= 1, but given {}",
                                 opts_.matrix_approximation_rank));
  if (opts_.start_powersgd_iter < 0)
    throw ValueError(
        fmt::format("powersgd: start_powersgd_iter should be >= 0, but given {}", opts_.start_powersgd_iter));
  if (!(opts_.min_compression_rate >= 0))
    throw ValueError(
        fmt::format("powersgd: min_compression_rate should be >= 0, but given {}", opts_.min_compression_rate));
  if (!(opts_.orthogonalization_epsilon >= 0))
    throw ValueError(fmt::format("powersgd: orthogonalization_epsilon should be >= 0, but given {}",
                                 opts_.orthogonalization_epsilon));
  if ((opts_.use_error_feedback || opts_.warm_start) && opts_.start_powersgd_iter <= 1)
    throw ValueError(fmt::format(
        "powersgd: start_powersgd_iter should be > 1 with use_error_feedback or warm_start, but given {} (the first "
        "iterations run plain all-reduce while the buckets settle)",
        opts_.start_powersgd_iter));
}

Work PowerSGDState::run(GradBucket& bucket) {
  const at::Tensor& input = bucket.buffer();
  const int world = get_world_size();
  if (iter_ < opts_.start_powersgd_iter) {
    if (bucket.is_last()) ++iter_;
    {
      at::NoGradGuard no_grad;
      input.div_(world);
    }
    return all_reduce_async(input, ReduceOp::Sum);
  }
  at::NoGradGuard no_grad;
  const std::size_t index = bucket.index();
  at::Tensor input_copy;
  if (opts_.use_error_feedback) {
    // Error and copy buffers live across iterations (fresh bucket-sized tensors per step cost more in
    // page faults than the arithmetic); a bucket whose size changed starts with no error.
    at::Tensor& error = error_[index];
    if (error.defined() && error.numel() == input.numel())
      input.add_(error);
    else
      error = at::zeros_like(input);
    at::Tensor& copy = input_copy_[index];
    if (!copy.defined() || copy.numel() != input.numel()) copy = at::empty_like(input);
    copy.copy_(input);
    input_copy = copy;
  }

  // Split the gradients into matrices worth compressing and the rest.
  auto plan = std::make_shared<Plan>();
  std::int64_t p_size = 0, q_size = 0;
  for (const at::Tensor& g : bucket.gradients()) {
    const std::int64_t n = g.dim() == 0 ? 1 : g.size(0);
    const std::int64_t m = n == 0 ? 0 : g.numel() / n;
    const std::int64_t r = std::min<std::int64_t>({n, m, opts_.matrix_approximation_rank});
    if (double((n + m) * r) * opts_.min_compression_rate < double(n * m)) {
      plan->matrices.push_back(g.view({n, m}));
      plan->ranks.push_back(r);
      p_size += n * r;
      q_size += m * r;
    } else {
      plan->uncompressed.push_back(g);
    }
  }
  std::int64_t rest_size = 0;
  for (const at::Tensor& t : plan->uncompressed) rest_size += t.numel();
  // P and the uncompressed rest share one buffer and one all-reduce: on a slow link every
  // collective costs a round trip or more, whatever its size.
  const bool randomize = !opts_.warm_start || !p_memory_.count(index) ||
                         p_memory_[index].numel() != p_size + rest_size || q_memory_[index].numel() != q_size;
  if (randomize) {
    p_memory_[index] = at::empty({p_size + rest_size}, input.options());
    q_memory_[index] = at::empty({q_size}, input.options());
  }
  const at::Tensor p_and_rest = p_memory_[index];
  plan->p_flat = p_and_rest.narrow(0, 0, p_size);
  plan->q_flat = q_memory_[index];
  std::int64_t p_at = 0, q_at = 0;
  for (std::size_t k = 0; k < plan->matrices.size(); ++k) {
    const std::int64_t n = plan->matrices[k].size(0), m = plan->matrices[k].size(1), r = plan->ranks[k];
    plan->ps.push_back(plan->p_flat.narrow(0, p_at, n * r).view({n, r}));
    plan->qs.push_back(plan->q_flat.narrow(0, q_at, m * r).view({m, r}));
    p_at += n * r;
    q_at += m * r;
  }
  if (randomize) {
    // The same draw on every rank: one seed from the shared sequence, a private generator.
    at::Generator gen = at::detail::createCPUGenerator(rng_() % 1000000000ULL);
    for (at::Tensor& q : plan->qs) {
      q.copy_(at::randn(q.sizes(), gen, at::TensorOptions().dtype(q.scalar_type())));
      orthogonalize(q, opts_.orthogonalization_epsilon);
    }
  } else {
    for (at::Tensor& q : plan->qs) orthogonalize(q, opts_.orthogonalization_epsilon);
  }
  for (std::size_t k = 0; k < plan->matrices.size(); ++k) at::matmul_out(plan->ps[k], plan->matrices[k], plan->qs[k]);

  // Launched now: the Ps and the uncompressed rest in one all-reduce.
  if (rest_size > 0) {
    plan->rest = p_and_rest.narrow(0, p_size, rest_size);
    std::int64_t at = 0;
    for (const at::Tensor& t : plan->uncompressed) {
      plan->rest.narrow(0, at, t.numel()).copy_(t.reshape({-1}));
      at += t.numel();
    }
  }
  if (p_size + rest_size > 0) plan->p_work = all_reduce_async(p_and_rest, ReduceOp::Sum);
  plan->input = input;
  plan->input_copy = input_copy;
  plan->index = index;
  plan->last = bucket.is_last();
  pending_.push_back(plan);
  // The bucket's Work completes with P's all-reduce; its continuation (run when the reducer waits for
  // the bucket) does the rest. P's own Work is also waited for by other buckets' continuations.
  return Work::after(plan->p_work).then([this, plan, world] {
    try {
      finish(*plan, world);
    } catch (...) {
      pending_.clear();  // a failed collective ends this iteration's compression
      throw;
    }
  });
}

// Second half of a bucket: P (all-reduced) orthogonalised, Q = M^T P launched.
void PowerSGDState::start_q(Plan& plan, int world) {
  plan.q_started = true;
  plan.p_work.wait();
  if (plan.rest.defined()) {
    plan.rest.div_(world);
    std::int64_t at = 0;
    for (at::Tensor& t : plan.uncompressed) {
      t.copy_(plan.rest.narrow(0, at, t.numel()).view(t.sizes()));
      at += t.numel();
    }
  }
  if (plan.ps.empty()) return;
  for (at::Tensor& p : plan.ps) orthogonalize(p, opts_.orthogonalization_epsilon);
  for (std::size_t k = 0; k < plan.matrices.size(); ++k) at::matmul_out(plan.qs[k], plan.matrices[k].t(), plan.ps[k]);
  plan.q_work = all_reduce_async(plan.q_flat, ReduceOp::Sum);
}

// The continuation of a bucket's Work. It first starts the Q all-reduce of every bucket launched so
// far, in bucket order (the same order on every rank), so that on a slow link the buckets' Q round
// trips overlap instead of following one another; then it completes its own bucket in place.
void PowerSGDState::finish(Plan& plan, int world) {
  at::NoGradGuard no_grad;
  for (const auto& pending : pending_)
    if (!pending->q_started) start_q(*pending, world);
  plan.q_work.wait();
  if (!plan.ps.empty()) {
    plan.q_flat.div_(world);
    for (std::size_t k = 0; k < plan.matrices.size(); ++k) at::matmul_out(plan.matrices[k], plan.ps[k], plan.qs[k].t());
  }
  if (opts_.use_error_feedback) at::sub_out(error_[plan.index], plan.input_copy, plan.input);
  if (!opts_.warm_start) {
    p_memory_.erase(plan.index);
    q_memory_.erase(plan.index);
  }
  std::erase_if(pending_, [&](const std::shared_ptr<Plan>& p) { return p.get() == &plan; });
  if (plan.last) ++iter_;
}

}  // namespace idist::detail
