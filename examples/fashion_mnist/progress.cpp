#include "progress.hpp"

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
  window_ = {};
  epoch_totals_ = {};
}

void Progress::resume_epoch(int epoch, std::int64_t done_steps, const Totals& totals) {
  start_epoch(epoch);
  steps_skipped_ += done_steps;
  epoch_totals_ = totals;
}

void Progress::step(std::int64_t step, const Totals& global, bool print_now) {
  ++steps_done_;
  window_ += global;
  epoch_totals_ += global;
  if (print_now || step == steps_per_epoch_) print(step);
}

void Progress::end_epoch() { trained_ += Clock::now() - epoch_start_; }

double Progress::train_seconds() const { return std::chrono::duration<double>(trained_).count(); }

void Progress::print(std::int64_t step) {
  const auto now = Clock::now();
  last_print_ = now;
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
