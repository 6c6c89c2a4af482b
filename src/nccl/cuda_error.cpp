#include "nccl/cuda_error.hpp"

#include <string>

#include <fmt/format.h>

#include "idist/error.hpp"
#include "launch/launcher_env.hpp"

namespace idist::nccl_backend {

void throw_cuda(cudaError_t err, std::string_view what) {
  throw BackendError(
      fmt::format("nccl backend: {} failed: {}: {}", what, cudaGetErrorName(err), cudaGetErrorString(err)));
}

std::string nccl_error_text(ncclResult_t res, ncclComm_t comm) {
  std::string text = ncclGetErrorString(res);
  // ncclGetLastError(nullptr) reports the last error of this thread; both may be empty.
  const char* last = ncclGetLastError(comm);
  if (last && *last) text += std::string(" (") + last + ")";
  return text;
}

std::string no_device_message(std::string_view reason, std::optional<std::string_view> cuda_visible_devices) {
  std::string msg = "the nccl backend needs a CUDA device; none is visible: ";
  msg += reason;
  if (cuda_visible_devices)
    msg += " (CUDA_VISIBLE_DEVICES=\"" + std::string(*cuda_visible_devices) + "\")";
  else
    msg += " (CUDA_VISIBLE_DEVICES is unset)";
  msg += "; use the gloo or mpi backend on machines without a GPU";
  return msg;
}

int require_cuda_device() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaSuccess && count > 0) return count;
  const std::optional<std::string> env = launch::cuda_visible_devices();
  const std::optional<std::string_view> visible = env ? std::optional<std::string_view>(*env) : std::nullopt;
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // leave no error behind for the caller's own CUDA calls
    throw BackendError(no_device_message(std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err), visible));
  }
  throw BackendError(no_device_message("cudaGetDeviceCount reports 0 devices", visible));
}

}  // namespace idist::nccl_backend
