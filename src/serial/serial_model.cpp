// Serial model: collectives over a world of one rank.
#include "serial/serial_model.hpp"

#include <cstring>

#include "backend_kit/cuda_probe.hpp"
#include "core/backend_factories.hpp"

namespace idist::serial_backend {

Device SerialModel::device() const {
  // ignite: cuda when a GPU is usable, else cpu.
  return backend_kit::cuda_device_count() > 0 ? Device{DeviceType::CUDA, 0} : Device{};
}

// The front door (ComputationModel) has checked the arguments as for every backend: out has the
// size and type of in, the root is rank 0. The data is already where it belongs, but for a gathering
// into another buffer.
Work SerialModel::do_reduce(const Reduction&, Completion) { return Work{}; }

Work SerialModel::do_gather(const Gathering& g, Completion) {
  if (g.in.bytes() && g.out.data != g.in.data) std::memmove(g.out.data, g.in.data, g.in.bytes());
  return Work{};
}

Work SerialModel::do_distribute(const Distribution&, Completion) { return Work{}; }

Work SerialModel::do_barrier(const ProcessGroup&, Completion) { return Work{}; }

std::unique_ptr<ComputationModel> create(const InitOptions&) { return std::make_unique<SerialModel>(); }

}  // namespace idist::serial_backend
