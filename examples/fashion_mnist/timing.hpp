#pragma once
// --print-timing: how long a (re)started rank takes to reach its first training step, for measuring
// recovery under a restarting launcher (torchrun, SLURM requeue).
#include <chrono>
#include <optional>
#include <string>

namespace fashion_mnist {

/// Unix time (seconds) at which this process started, from /proc/self/stat at clock-tick resolution;
/// std::nullopt where /proc is not available (then the timing line counts from main()).
std::optional<double> process_start_unix_seconds();

/// Unix time now, in seconds.
double unix_seconds_now();

/// Marks the phases of one rank's run and prints them once, after the first training step.
class StartupTiming {
 public:
  /// `enabled`: print the line at all (--print-timing); `rank`: named in it.
  StartupTiming(bool enabled, int rank);
  /// Before the checkpoint is loaded (setup done: rendezvous, data, model).
  void loading();
  /// After the checkpoint is loaded (or none was).
  void loaded();
  /// After a training step: the first call prints, on stderr,
  ///   fashion_mnist: timing: rank R: first step T s after the process started (setup S s, checkpoint
  ///   load L s); unix start U0 first_step U1
  void step_done();

 private:
  bool enabled_;
  int rank_;
  double start_;  // unix seconds
  double loading_ = 0, loaded_ = 0;
  bool printed_ = false;
};

}  // namespace fashion_mnist
