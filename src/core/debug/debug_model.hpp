#pragma once
// The single hook of IDIST_DISTRIBUTED_DEBUG: a ComputationModel that wraps the backend's model when
// diagnostics are on, so that every path (blocking and non-blocking collectives, the LibTorch
// layer, auto_model's buckets) goes through it. With debug OFF and no IDIST_TRACE_DIR the backend's
// model is used unwrapped: nothing is added to a collective.
#include <memory>

#include "core/debug/debug_settings.hpp"
#include "core/debug/diagnostics.hpp"
#include "idist/computation_model.hpp"

namespace idist::core::debug {

/// `model` itself when `settings.wrapped()` is false, else `model` inside a DebugModel.
std::unique_ptr<ComputationModel> wrap(std::unique_ptr<ComputationModel> model, const Settings& settings);

/// The debug level of `model` (Off unless it is a DebugModel).
DebugLevel level_of(ComputationModel& model);

/// Forwards everything to the backend's model; each collective first gets a sequence number and a
/// flight recorder entry, at DETAIL the fingerprint check, and its errors dump the recorder (timeouts
/// also name the ranks that never reached it).
class DebugModel final : public ComputationModel {
 public:
  DebugModel(std::unique_ptr<ComputationModel> inner, const Settings& settings);

  DebugLevel level() const noexcept { return diag_->settings().level; }

  std::string model_name() const override { return inner_->model_name(); }
  std::optional<std::string> backend() const override { return inner_->backend(); }
  Device device() const override { return inner_->device(); }
  /// Forwarded; the wrapper's copy of the layout follows the backend's.
  void set_local_rank(int local_rank) override {
    inner_->set_local_rank(local_rank);
    set_layout(inner_->layout());
  }
  bool has_async_progress() const override { return inner_->has_async_progress(); }
  std::optional<std::string> network_interface() const override { return inner_->network_interface(); }
  store::Store* rendezvous_store() override { return inner_->rendezvous_store(); }
  ComputationModel& backend_model() override { return inner_->backend_model(); }
  void finalize() override;
  std::optional<int> group_rank(const Group& group) override { return inner_->group_rank(group); }

  Device buffer_device() const override { return inner_->buffer_device(); }

 protected:
  /// The backend's model checks placement itself (its front door runs for every forwarded call).
  void check_device_buffer(std::string_view, std::string_view, const Device&) const override {}
  // Each collective: a sequence number and a recorder entry, at DETAIL the fingerprint check, then
  // the backend's model (through its front door).
  Work do_all_reduce(Buffer data, ReduceOp op, const Group& group) override;
  Work do_all_gather(ConstBuffer in, Buffer out, const Group& group) override;
  Work do_all_gather_v(ConstBuffer in, Buffer out, std::span<const std::size_t> counts, int group_rank,
                       const Group& group) override;
  Work do_broadcast(Buffer data, int src, int root, const Group& group) override;
  Work do_barrier(const Group& group) override;
  void do_all_reduce_blocking(Buffer data, ReduceOp op, const Group& group) override;
  void do_all_gather_blocking(ConstBuffer in, Buffer out, const Group& group) override;
  void do_broadcast_blocking(Buffer data, int src, int root, const Group& group) override;
  void do_barrier_blocking(const Group& group) override;
  void do_monitored_barrier(const Group& group, std::chrono::milliseconds timeout, bool wait_all_ranks) override;

 private:
  struct Call;  // one collective in progress: fingerprint, group, recorder entry
  Call begin(Collective c, DType dtype, std::size_t count, std::int64_t op, std::int64_t root, const Group& group);
  template <class Run>
  void run_blocking(Call& call, Run run);
  template <class Issue>
  Work run_async(Call& call, Issue issue);

  std::unique_ptr<ComputationModel> inner_;
  std::shared_ptr<Diagnostics> diag_;
};

}  // namespace idist::core::debug
