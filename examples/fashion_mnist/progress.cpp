#include "progress.hpp"

#include <cmath>

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

Progress::Progress(int epochs, std::int64_t steps_per_epoch, std::int64_t images_per_step,
                   std::chrono::milliseconds interval, bool enabled, std::FILE* out)
    : epochs_(epochs),
      steps_per_epoch_(steps_per_epoch),
      images_per_step_(images_per_step),
      interval_(interval),
      enabled_(enabled),
      out_(out) {}

void Progress::start_epoch(int epoch) {
  epoch_ = epoch;
  epoch_start_ = last_print_ = Clock::now();
  loss_sum_ = 0;
  loss_count_ = 0;
}

void Progress::step(std::int64_t step, double loss) {
  ++steps_done_;
  loss_sum_ += loss;
  ++loss_count_;
  if (step == steps_per_epoch_ || Clock::now() - last_print_ >= interval_) print(step);
}

void Progress::end_epoch() { trained_ += Clock::now() - epoch_start_; }

double Progress::train_seconds() const { return std::chrono::duration<double>(trained_).count(); }

void Progress::print(std::int64_t step) {
  const auto now = Clock::now();
  last_print_ = now;
  if (!enabled_) return;
  const double elapsed = std::chrono::duration<double>(trained_ + (now - epoch_start_)).count();
  const double rate = elapsed > 0 ? double(images_done()) / elapsed : 0.0;
  const std::int64_t steps_left = std::int64_t(epochs_) * steps_per_epoch_ - steps_done_;
  const double eta = rate > 0 ? double(steps_left * images_per_step_) / rate : NAN;
  const int width = int(fmt::formatted_size("{}", steps_per_epoch_));
  fmt::print(out_, "epoch {}/{}  step {:>{}}/{}  loss {:.4f}  {:.0f} img/s  ETA {}\n", epoch_, epochs_, step, width,
             steps_per_epoch_, loss_count_ > 0 ? loss_sum_ / double(loss_count_) : NAN, rate, format_duration(eta));
  std::fflush(out_);
  loss_sum_ = 0;
  loss_count_ = 0;
}

}  // namespace fashion_mnist
