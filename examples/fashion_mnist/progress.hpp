#pragma once
// Rank 0's progress report: a line every few seconds (not one per step) with epoch, step, loss and
// accuracy over all ranks, throughput and the estimated time left.
#include <chrono>
#include <cstdint>
#include <cstdio>

#include "metrics.hpp"

namespace fashion_mnist {

/// Prints progress lines to `out`:
///   epoch 1/1  step  312/938  loss 0.5123  acc 0.8170  1843 img/s  ETA 0:22
/// Loss and accuracy are over the examples of all ranks since the previous line; img/s counts the
/// images of all ranks. Each rank adds up its own steps' totals and reduces them over the ranks only
/// when a line is due (one all_reduce per line, not per step): rank 0 estimates from its clock at
/// which step the next line is due, and that step travels with the reduction, so every rank reduces
/// at the same steps and keeps the same totals. Only an enabled Progress (rank 0) prints.
class Progress {
 public:
  using Clock = std::chrono::steady_clock;

  /// `steps_per_epoch` steps of `images_per_step` images (all ranks together) for epochs `first_epoch`
  /// to `epochs` (1-based; a resumed run starts after 1); a line at most every `interval` (and always
  /// at the end of an epoch). `enabled` false prints nothing.
  Progress(int epochs, int first_epoch, std::int64_t steps_per_epoch, std::int64_t images_per_step,
           std::chrono::milliseconds interval, bool enabled, std::FILE* out = stderr);

  /// Starts (or resumes) the clock at the beginning of epoch `epoch` (1-based).
  void start_epoch(int epoch);
  /// Starts the clock in the middle of epoch `epoch`, resumed from a checkpoint after `done_steps`
  /// steps whose totals over all ranks were `totals` (they count in epoch_totals(), not in the rate).
  void resume_epoch(int epoch, std::int64_t done_steps, const Totals& totals);
  /// Records step `step` (1-based within the epoch) with this rank's totals of the step. Collective
  /// when a line is due (rank 0's plan) or the epoch ends: then reduces the totals (see sync).
  void step(std::int64_t step, const Totals& local);
  /// Collective: reduces the totals of the steps recorded since the previous reduction over all ranks
  /// (so that epoch_totals() is complete, e.g. before a checkpoint) and prints a line when rank 0
  /// decides that one is due. Nothing to do (no collective) when no step was recorded since.
  void sync(std::int64_t step);
  /// Stops the clock at the end of an epoch (evaluation time is then not counted).
  void end_epoch();
  /// Training seconds so far (the sum over epochs).
  double train_seconds() const;
  /// Images trained on so far by all ranks.
  std::int64_t images_done() const { return steps_done_ * images_per_step_; }
  /// Totals of the current (or last finished) epoch over all ranks.
  const Totals& epoch_totals() const { return epoch_totals_; }

 private:
  void print(std::int64_t step);
  LinePlan plan(std::int64_t step) const;

  int epochs_;
  int first_epoch_;
  std::int64_t steps_per_epoch_;
  std::int64_t images_per_step_;
  std::chrono::milliseconds interval_;
  bool enabled_;
  std::FILE* out_;
  int epoch_ = 0;
  std::int64_t steps_done_ = 0;     // over all epochs, by this run
  std::int64_t steps_skipped_ = 0;  // of the first epoch, done by the run that saved the checkpoint
  Clock::duration trained_{};       // finished epochs
  Clock::time_point epoch_start_{};
  Clock::time_point last_print_{};
  std::int64_t last_print_step_ = 0;  // within the epoch
  std::int64_t last_sync_step_ = 0;   // within the epoch
  std::int64_t next_sync_step_ = 1;   // within the epoch, agreed by every rank
  Totals pending_;                    // this rank's, since the previous reduction
  Totals window_;                     // all ranks', since the previous line
  Totals epoch_totals_;               // all ranks', since the start of the epoch
};

}  // namespace fashion_mnist
