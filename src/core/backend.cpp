// The backend interface's base: the layout and world group a backend records, and the defaults
// ("not supported" operations, host-only buffers, plain groups).
#include "core/backend.hpp"

#include <atomic>

#include <fmt/format.h>

#include "core/collective_checks.hpp"
#include "idist/error.hpp"

namespace idist {

namespace {

std::uint64_t next_backend_id() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

std::vector<int> all_ranks(int n) {
  std::vector<int> ranks(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) ranks[std::size_t(r)] = r;
  return ranks;
}

}  // namespace

ComputationModel::Backend::Backend(std::chrono::milliseconds timeout) : timeout_(timeout), id_(next_backend_id()) {
  set_layout(layout_);
}

ComputationModel::Backend::~Backend() = default;

Device ComputationModel::Backend::device() const { return Device{}; }

void ComputationModel::Backend::set_local_rank(int) {}

void ComputationModel::Backend::set_layout(const WorldLayout& layout) {
  layout_ = layout;
  world_ = std::make_shared<ProcessGroup>(all_ranks(layout.world_size), layout.rank, layout.world_size, id_);
}

void ComputationModel::Backend::mirror(const Backend& inner) {
  timeout_ = inner.timeout_;
  layout_ = inner.layout_;
  id_ = inner.id_;
  world_ = inner.world_;
}

void ComputationModel::Backend::unsupported(OpType op) const {
  throw BackendError(fmt::format("the {} backend does not support {}", backend().value_or("serial"), to_string(op)));
}

void ComputationModel::Backend::check_device_buffer(OpType op, std::string_view arg, const Device& device) const {
  core::check_host_buffer(backend().value_or("serial"), op, arg, device);
}

std::shared_ptr<ProcessGroup> ComputationModel::Backend::create_group(std::vector<int> sorted_ranks) {
  if (int(sorted_ranks.size()) == world_size()) return world_;
  return std::make_shared<ProcessGroup>(std::move(sorted_ranks), rank(), world_size(), id_);
}

Work ComputationModel::Backend::do_reduce(const Reduction& r, Completion) { unsupported(r.op); }
Work ComputationModel::Backend::do_gather(const Gathering& g, Completion) { unsupported(g.op); }
Work ComputationModel::Backend::do_distribute(const Distribution& d, Completion) { unsupported(d.op); }
Work ComputationModel::Backend::do_point_to_point(const PointToPoint& p, Completion) { unsupported(p.op); }
Work ComputationModel::Backend::do_barrier(const ProcessGroup&, Completion) { unsupported(OpType::Barrier); }
void ComputationModel::Backend::do_monitored_barrier(const ProcessGroup&, std::chrono::milliseconds, bool) {
  unsupported(OpType::MonitoredBarrier);
}

}  // namespace idist
