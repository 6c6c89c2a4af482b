// Serial model: collectives over a world of one rank.
#include "serial/serial_backend.hpp"

#include <cstring>

#include "backend_kit/cuda_probe.hpp"
#include "backend_kit/op_family.hpp"
#include "core/backend_factories.hpp"

namespace idist::serial_backend {

Device SerialBackend::device() const {
  // ignite: cuda when a GPU is usable, else cpu.
  return backend_kit::cuda_device_count() > 0 ? Device{DeviceType::CUDA, 0} : Device{};
}

// The front door (ComputationModel) has checked the arguments as for every backend: out has the
// size and type of in, the root is rank 0. One rank's result is its input: the data is already where
// it belongs, but for an operation into another buffer.
namespace {
Work copy(const ConstBuffer& in, const Buffer& out) {
  if (in.bytes() && out.data != in.data) std::memmove(out.data, in.data, in.bytes());
  return Work{};
}
}  // namespace

Work SerialBackend::do_reduce(const Reduction& r, Completion) {
  switch (r.op) {
    case OpType::AllReduce:
    case OpType::Reduce:
    case OpType::ReduceScatter:
    case OpType::ReduceScatterV:
      return copy(r.in, r.out);
    IDIST_OPTYPES_OUTSIDE_REDUCTION:
      break;
  }
  backend_kit::outside_family(r.op, backend_kit::OpFamily::Reduction);
}

Work SerialBackend::do_gather(const Gathering& g, Completion) {
  switch (g.op) {
    case OpType::AllGather:
    case OpType::AllGatherV:
    case OpType::Gather:
      return copy(g.in, g.out);
    IDIST_OPTYPES_OUTSIDE_GATHERING:
      break;
  }
  backend_kit::outside_family(g.op, backend_kit::OpFamily::Gathering);
}

Work SerialBackend::do_distribute(const Distribution& d, Completion) {
  switch (d.op) {
    case OpType::Broadcast:
    case OpType::Scatter:
    case OpType::AllToAll:
    case OpType::AllToAllV:
      return copy(d.in, d.out);
    IDIST_OPTYPES_OUTSIDE_DISTRIBUTION:
      break;
  }
  backend_kit::outside_family(d.op, backend_kit::OpFamily::Distribution);
}

Work SerialBackend::do_barrier(const ProcessGroup&, Completion) { return Work{}; }

std::unique_ptr<core::Backend> create(const InitOptions&) { return std::make_unique<SerialBackend>(); }

}  // namespace idist::serial_backend
