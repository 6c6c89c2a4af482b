#include "resume_state.hpp"

#include <string>

#include <fmt/format.h>

namespace fashion_mnist {

idist::CheckpointState checkpoint_state(const Options& o, const TrainingPoint& p, std::int64_t iteration) {
  return {.epoch = std::uint64_t(p.epoch),
          .iteration = std::uint64_t(iteration),
          .values = {{"epoch_step", p.epoch_step},
                     {"epoch_steps", p.epoch_steps},
                     {"loss_sum", p.epoch_totals.loss_sum},
                     {"correct", p.epoch_totals.correct},
                     {"count", p.epoch_totals.count},
                     {"test_accuracy", p.test_accuracy},
                     {"seed", std::int64_t(o.seed)},
                     {"lr", o.lr},
                     {"momentum", o.momentum},
                     {"optimizer", o.optimizer},
                     {"lr_schedule", std::string(o.lr_schedule == LrSchedule::Linear ? "linear" : "constant")},
                     {"epochs", std::int64_t(o.epochs)},
                     {"batch_size", o.batch_size},
                     {"limit", std::int64_t(o.limit)}}};
}

TrainingPoint training_point(const idist::LoadedCheckpoint& c) {
  TrainingPoint p;
  p.epoch = int(c.epoch);
  p.epoch_step = c.value<std::int64_t>("epoch_step");
  p.epoch_steps = c.value<std::int64_t>("epoch_steps");
  p.epoch_totals = {c.value<double>("loss_sum"), c.value<double>("correct"), c.value<double>("count")};
  p.test_accuracy = c.value<double>("test_accuracy");
  return p;
}

void report_differences(const idist::LoadedCheckpoint& c, const Options& o) {
  std::string diff;
  const auto note = [&](const char* flag, auto was, auto is) {
    if (was != is) diff += fmt::format("{}{} {} (checkpoint: {})", diff.empty() ? "" : ", ", flag, is, was);
  };
  note("--seed", c.value<std::int64_t>("seed"), std::int64_t(o.seed));
  note("--lr", c.value<double>("lr"), o.lr);
  note("--momentum", c.value<double>("momentum"), o.momentum);
  // Checkpoints written before --optimizer existed were SGD's.
  note("--optimizer", c.values.count("optimizer") ? c.value<std::string>("optimizer") : std::string("sgd"),
       o.optimizer);
  note("--lr-schedule", c.value<std::string>("lr_schedule"),
       std::string(o.lr_schedule == LrSchedule::Linear ? "linear" : "constant"));
  note("--epochs", c.value<std::int64_t>("epochs"), std::int64_t(o.epochs));
  note("--batch-size", c.value<std::int64_t>("batch_size"), o.batch_size);
  note("--limit", c.value<std::int64_t>("limit"), std::int64_t(o.limit));
  if (!diff.empty() && idist::get_rank() == 0)
    fmt::print(stderr, "fashion_mnist: warning: resuming with {}; the run will differ from an uninterrupted one\n",
               diff);
}

}  // namespace fashion_mnist
