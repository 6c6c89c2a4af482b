// LibTorch's current CUDA stream as the nccl backend's caller stream, and tensors held for the
// caching allocator (see cuda_streams.hpp and docs/nccl.md).
#include "torch/cuda_streams.hpp"

#include "idist/config.hpp"

#if IDIST_TORCH_CUDA && IDIST_HAVE_NCCL
#include <memory>

#include <c10/cuda/CUDAStream.h>

#include "nccl/stream_provider.hpp"
#endif

namespace idist::detail {

#if IDIST_TORCH_CUDA && IDIST_HAVE_NCCL

namespace {

void* current_stream(int device_index) {
  return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_index)).stream();
}

// Installed while libidist_torch is loaded: a program that uses the LibTorch layer gets
// ProcessGroupNCCL's ordering without a call of its own.
struct StreamProviderInstaller {
  StreamProviderInstaller() { nccl_backend::set_stream_provider(&current_stream); }
  ~StreamProviderInstaller() { nccl_backend::set_stream_provider(nullptr); }
};
const StreamProviderInstaller installer;

}  // namespace

void hold_until_collective_done(const at::Tensor& t) {
  if (t.defined() && t.is_cuda()) nccl_backend::hold_for_next_collective(std::make_shared<at::Tensor>(t));
}

#else

void hold_until_collective_done(const at::Tensor&) {}

#endif

}  // namespace idist::detail
