#pragma once
// The serial model: one process, no backend; every collective returns its input.
#include "core/backend.hpp"

namespace idist::serial_backend {

/// ignite's _SerialModel: rank 0 of a world of 1.
class SerialBackend final : public core::Backend {
 public:
  SerialBackend() : Backend(std::chrono::minutes(30)) {}
  std::string model_name() const override { return "serial"; }
  std::optional<std::string> backend() const override { return std::nullopt; }
  Device device() const override;

  /// Any device: one rank moves no data between processes (ignite's serial collectives return
  /// their input, on whatever device it is).
  void check_device_buffer(OpType, std::string_view, const Device&) const override {}
  Work do_reduce(const Reduction& r, Completion how) override;
  Work do_gather(const Gathering& g, Completion how) override;
  Work do_distribute(const Distribution& d, Completion how) override;
  Work do_barrier(const ProcessGroup& group, Completion how) override;
};

}  // namespace idist::serial_backend
