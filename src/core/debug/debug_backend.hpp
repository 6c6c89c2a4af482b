#pragma once
// The single hook of IDIST_DISTRIBUTED_DEBUG: a decorator of the backend interface that wraps the
// backend when diagnostics are on, so that every path (blocking and non-blocking operations, the
// LibTorch layer, auto_model's buckets) goes through it. With debug OFF and no IDIST_TRACE_DIR the
// backend is used undecorated: nothing is added to an operation.
#include <memory>

#include "core/backend.hpp"
#include "core/debug/debug_settings.hpp"
#include "core/debug/diagnostics.hpp"

namespace idist::core::debug {

/// `backend` itself when `settings.wrapped()` is false, else `backend` inside a DebugBackend.
std::unique_ptr<Backend> wrap(std::unique_ptr<Backend> backend, const Settings& settings);

/// The debug level of `model` (Off unless its backend is a DebugBackend).
DebugLevel level_of(ComputationModel& model);

/// Forwards everything to the backend it decorates. The front door has checked the operation and
/// resolved its group (the inner backend makes the groups); here each operation gets a sequence
/// number and a flight recorder entry, at DETAIL the fingerprint check, and goes to the inner
/// backend's do_* function; its errors dump the recorder (timeouts also name the ranks that never
/// reached it).
class DebugBackend final : public Backend {
 public:
  DebugBackend(std::unique_ptr<Backend> inner, const Settings& settings);

  DebugLevel level() const noexcept { return diag_->settings().level; }

  std::string model_name() const override { return inner_->model_name(); }
  std::optional<std::string> backend() const override { return inner_->backend(); }
  Device device() const override { return inner_->device(); }
  /// Forwarded; the decorator's copy of the layout follows the inner backend's.
  void set_local_rank(int local_rank) override;
  bool has_async_progress() const override { return inner_->has_async_progress(); }
  std::optional<std::string> network_interface() const override { return inner_->network_interface(); }
  std::shared_ptr<ProgressBoard> progress_board() override { return inner_->progress_board(); }
  Backend& undecorated() override { return inner_->undecorated(); }
  void finalize() override;
  Device buffer_device() const override { return inner_->buffer_device(); }

  void check_device_buffer(OpType op, std::string_view arg, const Device& device) const override;
  std::shared_ptr<ProcessGroup> create_group(std::vector<int> sorted_ranks) override;
  Work do_reduce(const Reduction& r, Completion how) override;
  Work do_gather(const Gathering& g, Completion how) override;
  Work do_distribute(const Distribution& d, Completion how) override;
  Work do_point_to_point(const PointToPoint& p, Completion how) override;
  Work do_barrier(const ProcessGroup& group, Completion how) override;
  void do_monitored_barrier(const ProcessGroup& group, std::chrono::milliseconds timeout, bool wait_all_ranks) override;

 private:
  // Numbers and records `fp` on `group`, checks it at DETAIL, then runs `run(how)` (the backend's do_*).
  template <class Run>
  Work traced(Fingerprint fp, const ProcessGroup& group, Completion how, Run run);
  // The same for the operation named `name` among `members` (world ranks); `checked`: the group that
  // compares fingerprints at DETAIL, null for point-to-point messages.
  template <class Run>
  Work traced(Fingerprint fp, const std::string& name, const std::vector<int>& members, const ProcessGroup* checked,
              Completion how, Run run);
  // DETAIL: the group all-gathers the fingerprints through the backend and compares them.
  void check_same_call(const Fingerprint& fp, const ProcessGroup& group);
  // all_to_all_v: what each rank sends to each other against what that rank expects to receive.
  void check_pair_counts(const Distribution& d, const Fingerprint& fp);

  std::unique_ptr<Backend> inner_;
  std::shared_ptr<Diagnostics> diag_;
};

}  // namespace idist::core::debug
