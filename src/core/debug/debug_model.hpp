#pragma once
// The single hook of IDIST_DISTRIBUTED_DEBUG: a ComputationModel that wraps the backend's model when
// diagnostics are on, so that every path (blocking and non-blocking operations, the LibTorch layer,
// auto_model's buckets) goes through it. With debug OFF and no IDIST_TRACE_DIR the backend's model is
// used unwrapped: nothing is added to an operation.
#include <memory>

#include "core/debug/debug_settings.hpp"
#include "core/debug/diagnostics.hpp"
#include "idist/computation_model.hpp"

namespace idist::core::debug {

/// `model` itself when `settings.wrapped()` is false, else `model` inside a DebugModel.
std::unique_ptr<ComputationModel> wrap(std::unique_ptr<ComputationModel> model, const Settings& settings);

/// The debug level of `model` (Off unless it is a DebugModel).
DebugLevel level_of(ComputationModel& model);

/// Forwards everything to the backend's model. Its front door checks and resolves the group once (the
/// backend makes the group), then each operation gets a sequence number and a flight recorder entry,
/// at DETAIL the fingerprint check, and goes to the backend's do_* function; its errors dump the
/// recorder (timeouts also name the ranks that never reached it).
class DebugModel final : public ComputationModel {
 public:
  DebugModel(std::unique_ptr<ComputationModel> inner, const Settings& settings);

  DebugLevel level() const noexcept { return diag_->settings().level; }

  std::string model_name() const override { return inner_->model_name(); }
  std::optional<std::string> backend() const override { return inner_->backend(); }
  Device device() const override { return inner_->device(); }
  /// Forwarded; the wrapper's copy of the layout follows the backend's.
  void set_local_rank(int local_rank) override;
  bool has_async_progress() const override { return inner_->has_async_progress(); }
  std::optional<std::string> network_interface() const override { return inner_->network_interface(); }
  std::shared_ptr<ProgressBoard> progress_board() override { return inner_->progress_board(); }
  ComputationModel& backend_model() override { return inner_->backend_model(); }
  void finalize() override;
  Device buffer_device() const override { return inner_->buffer_device(); }

 protected:
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

  std::unique_ptr<ComputationModel> inner_;
  std::shared_ptr<Diagnostics> diag_;
};

}  // namespace idist::core::debug
