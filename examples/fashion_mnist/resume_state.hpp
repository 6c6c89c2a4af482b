#pragma once
// What the example records in its idist::Checkpoint beside the model, the optimizer and the loader:
// where training stands (epoch, steps done, the epoch's running totals) and the options that shape
// the run, so that a resumed run continues the schedule, the progress and the metrics.
#include <cstdint>

#include <idist/idist.hpp>

#include "metrics.hpp"
#include "options.hpp"

namespace fashion_mnist {

/// Where training stands.
struct TrainingPoint {
  int epoch = 1;                 ///< the epoch in progress, or just finished (1-based)
  std::int64_t epoch_step = 0;   ///< steps of it done
  std::int64_t epoch_steps = 0;  ///< steps per epoch of the run that saved (0: nothing saved yet)
  Totals epoch_totals{};         ///< loss and accuracy sums of those steps over all ranks
  double test_accuracy = 0;      ///< the epoch's test accuracy, once it is finished

  /// Whether the epoch was finished (trained and evaluated) when saved.
  bool epoch_finished() const { return epoch_steps > 0 && epoch_step >= epoch_steps; }
};

/// The checkpoint state of `point` in a run with options `o`; `iteration` names the file.
idist::CheckpointState checkpoint_state(const Options& o, const TrainingPoint& point, std::int64_t iteration);

/// The training point a checkpoint recorded.
/// @throws idist::ValueError when a value is missing (a checkpoint of another program).
TrainingPoint training_point(const idist::LoadedCheckpoint& loaded);

/// Warns (rank 0) about options that differ from the checkpoint's: the command line's values are used.
void report_differences(const idist::LoadedCheckpoint& loaded, const Options& o);

}  // namespace fashion_mnist
