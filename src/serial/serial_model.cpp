// Serial model: collectives over a world of one rank.
#include "serial/serial_model.hpp"

#include <cstring>

#include "core/collective_checks.hpp"
#include "core/cuda_probe.hpp"
#include "core/reduce_check.hpp"

namespace idist::serial {

Device SerialModel::device() const {
  // ignite: cuda when a GPU is usable, else cpu.
  return core::cuda_device_count() > 0 ? Device{DeviceType::CUDA, 0} : Device{};
}

std::optional<int> SerialModel::group_rank(const Group& group) {
  normalize_group(group);  // validates: only rank 0 exists
  return 0;
}

Work SerialModel::all_reduce(Buffer data, ReduceOp op, const Group&) {
  core::check_reduce_op(data.dtype, op);
  return Work{};
}

// The same argument checks as every backend's (a world of one rank): nothing is copied into an
// `out` of the wrong size or type.
Work SerialModel::all_gather(ConstBuffer in, Buffer out, const Group&) {
  core::check_all_gather_args(in, out, 1);
  if (in.bytes() && out.data != in.data) std::memmove(out.data, in.data, in.bytes());
  return Work{};
}

Work SerialModel::all_gather_v(ConstBuffer in, Buffer out, std::span<const std::size_t> counts, const Group&) {
  core::check_all_gather_v_args(in, out, counts, 1, 0);
  if (in.bytes() && out.data != in.data) std::memmove(out.data, in.data, in.bytes());
  return Work{};
}

Work SerialModel::broadcast(Buffer, int src, const Group&) {
  core::check_world_root(src, 1);
  return Work{};
}

Work SerialModel::barrier(const Group&) { return Work{}; }

}  // namespace idist::serial
