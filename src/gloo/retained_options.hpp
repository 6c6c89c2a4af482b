#pragma once
// Gloo's collective options own UnboundBuffers, whose condition variables Gloo's transport loop thread
// signals when data arrives or a pair fails. When an operation throws (timeout, lost peer) that thread may
// still signal them after the call returned: destroying the options then, on the caller's thread, races
// with it (ThreadSanitizer saw exactly this). The options of a failed operation are therefore kept until
// the backend is torn down, after the device and its loop thread are gone. Successful operations have
// received every notification before they return, so their options are freed at once.

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <gloo/context.h>

namespace idist::gloo_backend {

/// Options of failed gloo operations, kept alive until clear().
class RetainedOptions {
 public:
  /// Builds Options for `ctx` on the heap, runs `run(options)` and frees them; when `run` throws, keeps
  /// them and rethrows.
  template <class Options, class Run>
  void run(const std::shared_ptr<gloo::Context>& ctx, const Run& run) {
    auto options = std::make_shared<Options>(ctx);
    try {
      run(*options);
    } catch (...) {
      std::lock_guard lock(mutex_);
      kept_.push_back(std::move(options));
      throw;
    }
  }
  /// Keeps `object` (the buffers of a failed operation that is not an Options class) until clear().
  void keep(std::shared_ptr<void> object) {
    std::lock_guard lock(mutex_);
    kept_.push_back(std::move(object));
  }
  /// Frees what was kept; call once no transport thread can touch it any more.
  void clear() {
    std::lock_guard lock(mutex_);
    kept_.clear();
  }

 private:
  std::mutex mutex_;
  std::vector<std::shared_ptr<void>> kept_;
};

}  // namespace idist::gloo_backend
