#pragma once
// Gloo's reduce-scatter (ReduceScatterHalvingDoubling) is an algorithm object built for one buffer
// and meant to run many times. Built and destroyed per call, its last notifications may still be in
// Gloo's transport when it is freed (a benchmark built that way saw wrong results at 3 ranks). A
// group keeps the few it built last, each with the buffer it reduces in place, and reuses them.
#include <gloo/algorithm.h>

#include <cstddef>
#include <deque>
#include <memory>
#include <vector>

namespace idist::gloo_backend {

/// One reduce-scatter of a group: elements of `element_size` bytes, `count` in all, blocks[i] for
/// group rank i.
struct ReduceScatterPlan {
  std::size_t element_size = 0;
  std::size_t count = 0;
  std::vector<int> blocks;
  std::vector<std::byte> work;                 ///< the buffer the algorithm reduces in place
  std::shared_ptr<gloo::Algorithm> algorithm;  ///< built over `work`
};

/// The plans of one group, most recent last. Used only by the operation running on the group (one
/// at a time), so unsynchronised. Every rank makes and drops plans in the same order, as Gloo's slot
/// numbering requires.
class ReduceScatterCache {
 public:
  /// How many plans a group keeps.
  static constexpr std::size_t kKept = 4;

  /// The plan for (element_size, count, blocks); `make(plan)` builds the algorithm of a new one (its
  /// `work` already sized). The oldest plan beyond kKept is dropped.
  template <class Make>
  std::shared_ptr<ReduceScatterPlan> get(std::size_t element_size, std::size_t count, const std::vector<int>& blocks,
                                         Make make) {
    for (const auto& p : plans_)
      if (p->element_size == element_size && p->count == count && p->blocks == blocks) return p;
    auto plan = std::make_shared<ReduceScatterPlan>();
    plan->element_size = element_size;
    plan->count = count;
    plan->blocks = blocks;
    plan->work.resize(element_size * count);
    make(*plan);
    plans_.push_back(plan);
    if (plans_.size() > kKept) plans_.pop_front();
    return plan;
  }

  /// Forgets `plan` (after a failure: the caller keeps it for the transport thread).
  void drop(const std::shared_ptr<ReduceScatterPlan>& plan) {
    for (auto it = plans_.begin(); it != plans_.end(); ++it)
      if (*it == plan) {
        plans_.erase(it);
        return;
      }
  }

 private:
  std::deque<std::shared_ptr<ReduceScatterPlan>> plans_;
};

}  // namespace idist::gloo_backend
