#pragma once
// Rank 0's progress report: a line every few seconds (not one per step) with epoch, step, loss,
// throughput and the estimated time left.
#include <chrono>
#include <cstdint>
#include <cstdio>

namespace fashion_mnist {

/// Prints progress lines to `out`:
///   epoch 1/1  step  312/938  loss 0.5123  1843 img/s  ETA 0:22
/// The loss is the mean over the steps since the previous line; img/s counts the images of all ranks.
class Progress {
 public:
  using Clock = std::chrono::steady_clock;

  /// `steps_per_epoch` steps of `images_per_step` images (all ranks together) for `epochs` epochs;
  /// a line at most every `interval` (and always at the end of an epoch). `enabled` false prints nothing.
  Progress(int epochs, std::int64_t steps_per_epoch, std::int64_t images_per_step, std::chrono::milliseconds interval,
           bool enabled, std::FILE* out = stderr);

  /// Starts (or resumes) the clock at the beginning of epoch `epoch` (1-based).
  void start_epoch(int epoch);
  /// Records step `step` (1-based within the epoch) and its loss; prints when a line is due.
  void step(std::int64_t step, double loss);
  /// Stops the clock at the end of an epoch (evaluation time is then not counted).
  void end_epoch();
  /// Training seconds so far (the sum over epochs).
  double train_seconds() const;
  /// Images trained on so far by all ranks.
  std::int64_t images_done() const { return steps_done_ * images_per_step_; }

 private:
  void print(std::int64_t step);

  int epochs_;
  std::int64_t steps_per_epoch_;
  std::int64_t images_per_step_;
  std::chrono::milliseconds interval_;
  bool enabled_;
  std::FILE* out_;
  int epoch_ = 0;
  std::int64_t steps_done_ = 0;  // over all epochs
  Clock::duration trained_{};    // finished epochs
  Clock::time_point epoch_start_{};
  Clock::time_point last_print_{};
  double loss_sum_ = 0;
  std::int64_t loss_count_ = 0;
};

}  // namespace fashion_mnist
