#include "common/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace idist_bench {

double quantile(const std::vector<double>& sorted, double q) {
  const double pos = q * double(sorted.size() - 1);
  const auto lo = std::size_t(std::floor(pos));
  const auto hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - double(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

Summary summarize(std::vector<double> samples) {
  Summary s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.n = samples.size();
  s.min = samples.front();
  s.max = samples.back();
  s.avg = std::accumulate(samples.begin(), samples.end(), 0.0) / double(s.n);
  s.p50 = quantile(samples, 0.50);
  s.p90 = quantile(samples, 0.90);
  s.p95 = quantile(samples, 0.95);
  s.p99 = quantile(samples, 0.99);
  return s;
}

}  // namespace idist_bench
