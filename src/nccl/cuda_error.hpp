#pragma once
// Turning CUDA and NCCL status codes into idist errors, and the "is there a CUDA device" check that
// initialize("nccl") runs first.
#include <cuda_runtime.h>
#include <nccl.h>

#include <optional>
#include <string>
#include <string_view>

namespace idist::nccl_backend {

/// Throws BackendError "nccl backend: <what> failed: <cudaGetErrorName>: <cudaGetErrorString>".
[[noreturn]] void throw_cuda(cudaError_t err, std::string_view what);

/// throw_cuda unless `err` is cudaSuccess.
inline void check_cuda(cudaError_t err, std::string_view what) {
  if (err != cudaSuccess) throw_cuda(err, what);
}

/// check_cuda for `call` made on behalf of the collective `op`: the message names "<call> (<op>)",
/// a string built only on failure, since collectives call this on every issue.
inline void check_cuda(cudaError_t err, std::string_view call, std::string_view op) {
  if (err != cudaSuccess) throw_cuda(err, std::string(call) + " (" + std::string(op) + ")");
}

/// "<ncclGetErrorString>" plus NCCL's last error message for `comm` when it has one.
std::string nccl_error_text(ncclResult_t res, ncclComm_t comm);

/// The message of initialize("nccl") without a device (pure, for tests): "the nccl backend needs a
/// CUDA device; none is visible: <reason> (CUDA_VISIBLE_DEVICES=<value> | is unset)".
std::string no_device_message(std::string_view reason, std::optional<std::string_view> cuda_visible_devices);

/// Number of CUDA devices this process can use.
/// @throws BackendError with no_device_message() when cudaGetDeviceCount fails or reports none.
int require_cuda_device();

}  // namespace idist::nccl_backend
