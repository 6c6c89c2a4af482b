#pragma once
// The serial model: one process, no backend; every collective returns its input.
#include "idist/computation_model.hpp"

namespace idist::serial_backend {

/// ignite's _SerialModel: rank 0 of a world of 1.
class SerialModel final : public ComputationModel {
 public:
  SerialModel() : ComputationModel(std::chrono::minutes(30)) {}
  std::string model_name() const override { return "serial"; }
  std::optional<std::string> backend() const override { return std::nullopt; }
  Device device() const override;
  std::optional<int> group_rank(const Group& group) override;

 protected:
  /// Any device: one rank moves no data between processes (ignite's serial collectives return
  /// their input, on whatever device it is).
  void check_device_buffer(std::string_view, std::string_view, const Device&) const override {}
  Work do_all_reduce(Buffer data, ReduceOp op, const Group& group) override;
  Work do_all_gather(ConstBuffer in, Buffer out, const Group& group) override;
  Work do_all_gather_v(ConstBuffer in, Buffer out, std::span<const std::size_t> counts, int group_rank,
                       const Group& group) override;
  Work do_broadcast(Buffer data, int src, int root, const Group& group) override;
  Work do_barrier(const Group& group) override;
};

}  // namespace idist::serial_backend
