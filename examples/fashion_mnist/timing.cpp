#include "timing.hpp"

#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

#include <fmt/format.h>

namespace fashion_mnist {
namespace {

double clock_seconds(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

}  // namespace

double unix_seconds_now() { return clock_seconds(CLOCK_REALTIME); }

std::optional<double> process_start_unix_seconds() {
  // Field 22 of /proc/self/stat: the start in clock ticks since boot (CLOCK_BOOTTIME). Fields after the
  // command name, which may hold spaces, are counted from its closing parenthesis.
  std::ifstream in("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i < 22 && fields >> field; ++i) {
  }
  unsigned long long ticks = 0;
  if (!(fields >> ticks)) return std::nullopt;
  const long hz = sysconf(_SC_CLK_TCK);
  if (hz <= 0) return std::nullopt;
  const double age = clock_seconds(CLOCK_BOOTTIME) - double(ticks) / double(hz);
  return unix_seconds_now() - age;
}

StartupTiming::StartupTiming(bool enabled, int rank)
    : enabled_(enabled), rank_(rank), start_(process_start_unix_seconds().value_or(unix_seconds_now())) {}

void StartupTiming::loading() { loading_ = unix_seconds_now(); }

void StartupTiming::loaded() { loaded_ = unix_seconds_now(); }

void StartupTiming::step_done() {
  if (!enabled_ || printed_) return;
  printed_ = true;
  const double now = unix_seconds_now();
  fmt::print(stderr,
             "fashion_mnist: timing: rank {}: first step {:.3f} s after the process started (setup {:.3f} s, "
             "checkpoint load {:.3f} s); unix start {:.3f} first_step {:.3f}\n",
             rank_, now - start_, loading_ - start_, loaded_ - loading_, start_, now);
  std::fflush(stderr);
}

}  // namespace fashion_mnist
