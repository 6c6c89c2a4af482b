#include "progress.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

namespace fashion_mnist {
namespace {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = std::int64_t(std::llround(seconds));
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

}  // namespace

Progress::Progress(int epochs, int first_epoch, std::int64_t steps_per_epoch, std::int64_t images_per_step,
                   std::chrono::milliseconds interval, bool enabled, std::FILE* out)
    : epochs_(epochs),
      first_epoch_(first_epoch),
      steps_per_epoch_(steps_per_epoch),
      images_per_step_(images_per_step),
      interval_(interval),
      enabled_(enabled),
      out_(out) {}

void Progress::start_epoch(int epoch) {
  epoch_ = epoch;
  epoch_start_ = last_print_ = Clock::now();
  last_print_step_ = last_sync_step_ = 0;
  next_sync_step_ = 1;  // the first step's time is rank 0's first estimate
  pending_ = window_ = epoch_totals_ = {};
}

void Progress::resume_epoch(int epoch, std::int64_t done_steps, const Totals& totals) {
  start_epoch(epoch);
  steps_skipped_ += done_steps;
  last_print_step_ = last_sync_step_ = done_steps;
  next_sync_step_ = done_steps + 1;
  epoch_totals_ = totals;
}

void Progress::step(std::int64_t step, const Totals& local) {
  ++steps_done_;
  pending_ += local;
  if (step >= next_sync_step_ || step == steps_per_epoch_) sync(step);
}

void Progress::sync(std::int64_t step) {
  if (step == last_sync_step_) return;
  const auto [global, agreed] = reduce_totals(std::exchange(pending_, Totals{}), plan(step));
  last_sync_step_ = step;
  next_sync_step_ = agreed.next_step;
  window_ += global;
  epoch_totals_ += global;
  if (agreed.print || step == steps_per_epoch_) print(step);
}

// Rank 0's decision at a reduction: a line when the interval is over to within half a step, and the
// next reduction at the step where the following line should be due at the window's pace.
LinePlan Progress::plan(std::int64_t step) const {
  const auto since_line = std::chrono::duration<double>(Clock::now() - last_print_).count();
  const double interval = std::chrono::duration<double>(interval_).count();
  const double per_step = since_line / double(std::max<std::int64_t>(1, step - last_print_step_));
  const bool print = since_line + per_step / 2 >= interval;
  const double left = print ? interval : interval - since_line;
  const auto ahead = std::int64_t(std::ceil(left / std::max(per_step, 1e-9)));
  return {print, step + std::clamp<std::int64_t>(ahead, 1, steps_per_epoch_)};
}

void Progress::end_epoch() { trained_ += Clock::now() - epoch_start_; }

double Progress::train_seconds() const { return std::chrono::duration<double>(trained_).count(); }

void Progress::print(std::int64_t step) {
  const auto now = Clock::now();
  last_print_ = now;
  last_print_step_ = step;
  const Totals window = std::exchange(window_, Totals{});
  if (!enabled_) return;
  const double elapsed = std::chrono::duration<double>(trained_ + (now - epoch_start_)).count();
  const double rate = elapsed > 0 ? double(images_done()) / elapsed : 0.0;
  const std::int64_t steps_left =
      std::int64_t(epochs_ - first_epoch_ + 1) * steps_per_epoch_ - steps_done_ - steps_skipped_;
  const double eta = rate > 0 ? double(steps_left * images_per_step_) / rate : NAN;
  const int width = int(fmt::formatted_size("{}", steps_per_epoch_));
  fmt::print(out_, "epoch {}/{}  step {:>{}}/{}  loss {:.4f}  acc {:.4f}  {:.0f} img/s  ETA {}\n", epoch_, epochs_,
             step, width, steps_per_epoch_, window.mean_loss(), window.accuracy(), rate, format_duration(eta));
  std::fflush(out_);
}

}  // namespace fashion_mnist
