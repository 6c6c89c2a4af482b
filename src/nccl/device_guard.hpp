#pragma once
// Makes a CUDA device current for a scope: any thread may issue collectives, and NCCL / CUDA calls
// act on the current device.
#include <cuda_runtime.h>

namespace idist::nccl_backend {

/// Sets `device` current and restores the previous one at scope exit.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) noexcept {
    int current = -1;
    if (cudaGetDevice(&current) == cudaSuccess && current != device && cudaSetDevice(device) == cudaSuccess)
      previous_ = current;
  }
  ~DeviceGuard() {
    if (previous_ >= 0) (void)cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace idist::nccl_backend
