// The Reducer's bucket cap tuning: when AutoModelOptions::bucket_cap_mb is unset, the first
// synchronised backwards try each candidate cap in turn and the fastest is kept. Every rank switches
// layouts at the same synchronised backward (sync_count_ agrees, shadow backwards under join
// included) and the choice comes from timings reduced with max, so every rank picks the same cap.
#include <algorithm>
#include <span>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "idist/collectives.hpp"
#include "idist/logging.hpp"
#include "launch/settings.hpp"
#include "torch/reducer_impl.hpp"

namespace idist::detail {

namespace {
// Largest first: the first trial is the default layout the reducer starts with.
constexpr double kCandidatesMb[] = {25.0, 10.0, 5.0, 2.0, 1.0};
// Per trial: backwards after a rebuild that are not timed (fresh buffers, a hook's wire buffers),
// then the timed ones, whose median counts.
constexpr std::size_t kUntimed = 1;
constexpr std::size_t kTimed = 5;
constexpr std::string_view kLogger = "distributed.auto.auto_model";

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;  // this rank timed nothing (shadow backwards only): the others decide
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

void ReducerImpl::start_autotune() {
  if (opts_.bucket_cap_mb || world_size_ < 2 || launch::bucket_autotune_disabled()) return;
  // Only caps that change the buckets are worth a trial.
  std::vector<std::vector<std::vector<std::size_t>>> seen;
  for (double cap : kCandidatesMb) {
    auto l = layout(order_, cap);
    if (std::find(seen.begin(), seen.end(), l) != seen.end()) continue;
    seen.push_back(std::move(l));
    tune_.caps.push_back(cap);
  }
  if (tune_.caps.size() < 2) {
    log_info(kLogger,
             fmt::format("gradient buckets: bucket_cap_mb={} (every candidate cap gives the same buckets)", cap_mb_));
    return;
  }
  tune_.seconds.assign(tune_.caps.size(), {});
  tune_.active = true;
  cap_mb_ = tune_.caps.front();
}

void ReducerImpl::autotune_step(bool timed) {
  if (!tune_.active) return;
  ++tune_.iteration;
  if (timed && tune_.iteration > kUntimed)
    tune_.seconds[tune_.trial].push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - backward_start_).count());
  if (tune_.iteration < kUntimed + kTimed) return;
  tune_.iteration = 0;
  if (++tune_.trial < tune_.caps.size()) {
    cap_mb_ = tune_.caps[tune_.trial];
    build_buckets(order_);
    return;
  }
  // The slowest rank's median per candidate: max is exact, so every rank sees the same numbers.
  std::vector<double> medians;
  for (const auto& s : tune_.seconds) medians.push_back(median(s));
  all_reduce(std::span<double>(medians), ReduceOp::Max);
  const auto best = std::size_t(std::min_element(medians.begin(), medians.end()) - medians.begin());
  tune_.active = false;
  cap_mb_ = tune_.caps[best];
  build_buckets(order_);
  std::vector<std::string> trials;
  for (std::size_t k = 0; k < medians.size(); ++k)
    trials.push_back(fmt::format("{} MiB {:.3f} ms", tune_.caps[k], medians[k] * 1e3));
  log_info(kLogger, fmt::format("gradient buckets: bucket_cap_mb={} (tuned; median backward with communication: {})",
                                cap_mb_, fmt::join(trials, ", ")));
}

void ReducerImpl::stop_autotune() {
  if (!tune_.active) return;
  tune_.active = false;
  if (cap_mb_ == kDefaultBucketCapMb) return;
  cap_mb_ = kDefaultBucketCapMb;
  build_buckets(order_);
}

}  // namespace idist::detail
