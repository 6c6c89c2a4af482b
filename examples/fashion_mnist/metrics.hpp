#pragma once
// Training loss and accuracy summed over the ranks, and a digest of the weights for the JSON line.
#include <cstdint>
#include <string>
#include <utility>

#include <torch/torch.h>

namespace fashion_mnist {

/// Sums of one or more steps: loss times examples, correct predictions, examples.
struct Totals {
  double loss_sum = 0;
  double correct = 0;
  double count = 0;

  Totals& operator+=(const Totals& o) {
    loss_sum += o.loss_sum;
    correct += o.correct;
    count += o.count;
    return *this;
  }
  /// Mean loss per example (NaN when empty).
  double mean_loss() const;
  /// Fraction of correct predictions (NaN when empty).
  double accuracy() const;
};

/// This rank's totals of one step: `loss` is the batch's mean cross-entropy, `logits` [B, 10].
Totals step_totals(const torch::Tensor& loss, const torch::Tensor& logits, const torch::Tensor& target);

/// What rank 0 decides when totals are reduced: whether to print a progress line now, and at which
/// step (1-based within the epoch) the next reduction is due.
struct LinePlan {
  bool print = false;
  std::int64_t next_step = 0;
};

/// One all_reduce (collective: every rank calls it at the same steps): the totals of the steps since
/// the previous reduction over all ranks, and rank 0's `plan` (the other ranks' is ignored), so that
/// every rank agrees on when lines are printed and totals reduced next.
std::pair<Totals, LinePlan> reduce_totals(const Totals& local, const LinePlan& plan);

/// FNV-1a (64 bits) of the parameters' and then the buffers' bytes in registration order, as 16 hex
/// digits: equal digests mean bitwise-equal weights (e.g. a resumed run against an uninterrupted one).
std::string weights_digest(const torch::nn::Module& model);

/// Collective: weights_digest of every rank's `model`, which must agree.
/// @throws idist::Error on every rank, naming each rank's digest, when they differ.
std::string agreed_weights_digest(const torch::nn::Module& model);

}  // namespace fashion_mnist
