// Defaults shared by every ComputationModel: group validation and "not supported" collectives.
#include "idist/computation_model.hpp"

#include <algorithm>
#include <string>

#include "idist/error.hpp"

namespace idist {

Device ComputationModel::device() const { return Device{}; }

void ComputationModel::set_local_rank(int) {}

std::vector<int> ComputationModel::normalize_group(const Group& group) const {
  const int n = world_size();
  std::vector<int> ranks = group.ranks();
  if (group.is_world()) {
    ranks.resize(std::size_t(n));
    for (int r = 0; r < n; ++r) ranks[std::size_t(r)] = r;
    return ranks;
  }
  for (int r : ranks)
    if (r < 0 || r >= n)
      throw ValueError("group " + group.str() + ": rank " + std::to_string(r) + " is outside [0, " + std::to_string(n) +
                       ") (world size " + std::to_string(n) + ")");
  std::sort(ranks.begin(), ranks.end());
  if (std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end())
    throw ValueError("group " + group.str() + ": ranks must be distinct");
  return ranks;
}

void ComputationModel::unsupported(std::string_view what) const {
  throw BackendError("the " + backend().value_or("serial") + " backend does not support " + std::string(what));
}

Work ComputationModel::all_reduce(Buffer, ReduceOp, const Group&) { unsupported("all_reduce"); }
Work ComputationModel::all_gather(ConstBuffer, Buffer, const Group&) { unsupported("all_gather"); }
Work ComputationModel::all_gather_v(ConstBuffer, Buffer, std::span<const std::size_t>, const Group&) {
  unsupported("all_gather with different lengths");
}
Work ComputationModel::broadcast(Buffer, int, const Group&) { unsupported("broadcast"); }
Work ComputationModel::barrier(const Group&) { unsupported("barrier"); }

void ComputationModel::all_reduce_blocking(Buffer data, ReduceOp op, const Group& group) {
  all_reduce(data, op, group).wait();
}
void ComputationModel::all_gather_blocking(ConstBuffer in, Buffer out, const Group& group) {
  all_gather(in, out, group).wait();
}
void ComputationModel::broadcast_blocking(Buffer data, int src, const Group& group) {
  broadcast(data, src, group).wait();
}
void ComputationModel::barrier_blocking(const Group& group) { barrier(group).wait(); }
void ComputationModel::monitored_barrier(const Group& group, std::chrono::milliseconds, bool) {
  if (group_size(group) > 1) unsupported("monitored_barrier");
}

}  // namespace idist
