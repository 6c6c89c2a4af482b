#pragma once
// Small helpers shared by the benchmarks: clocks, formatting, cross-rank reductions of samples.
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace idist_bench {

using Clock = std::chrono::steady_clock;

/// Microseconds between two time points.
inline double micros(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

/// For each index, the maximum of samples[i] over every rank of the world (in place). Every rank
/// must pass the same number of samples. Uses idist's blocking all_reduce (outside timed regions).
void max_over_ranks(std::vector<double>& samples);

/// Fixed-point text of `v` with `digits` decimals ("12.35").
std::string fixed(double v, int digits);

/// The 1-minute, 5-minute and 15-minute load averages from /proc/loadavg ("0.52 0.60 0.71").
std::string load_average();

}  // namespace idist_bench
