// Serial model: collectives over a world of one rank.
#include "serial/serial_model.hpp"

#include <cstring>

#include "core/cuda_probe.hpp"

namespace idist::serial_backend {

Device SerialModel::device() const {
  // ignite: cuda when a GPU is usable, else cpu.
  return core::cuda_device_count() > 0 ? Device{DeviceType::CUDA, 0} : Device{};
}

std::optional<int> SerialModel::group_rank(const Group& group) {
  normalize_group(group);  // validates: only rank 0 exists
  return 0;
}

// The front door (ComputationModel) has checked the arguments as for every backend: out has the
// size and type of in, the root is rank 0.
Work SerialModel::do_all_reduce(Buffer, ReduceOp, const Group&) { return Work{}; }

Work SerialModel::do_all_gather(ConstBuffer in, Buffer out, const Group&) {
  if (in.bytes() && out.data != in.data) std::memmove(out.data, in.data, in.bytes());
  return Work{};
}

Work SerialModel::do_all_gather_v(ConstBuffer in, Buffer out, std::span<const std::size_t>, int, const Group& group) {
  return do_all_gather(in, out, group);
}

Work SerialModel::do_broadcast(Buffer, int, int, const Group&) { return Work{}; }

Work SerialModel::do_barrier(const Group&) { return Work{}; }

}  // namespace idist::serial_backend
