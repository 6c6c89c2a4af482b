#pragma once
// Order statistics of timing samples (percentiles by linear interpolation between ranks).
#include <cstddef>
#include <vector>

namespace idist_bench {

/// Summary of a set of samples, in the samples' unit.
struct Summary {
  std::size_t n = 0;
  double min = 0, max = 0, avg = 0;
  double p50 = 0, p90 = 0, p95 = 0, p99 = 0;
};

/// The q-quantile (0 <= q <= 1) of `sorted` (ascending, non-empty), interpolating linearly between
/// the two nearest ranks (numpy's default "linear" method).
double quantile(const std::vector<double>& sorted, double q);

/// Summarises `samples` (any order); all zeros when empty.
Summary summarize(std::vector<double> samples);

}  // namespace idist_bench
