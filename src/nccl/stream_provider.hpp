#pragma once
/// @file
/// The caller's CUDA stream as the nccl backend sees it. Every collective first makes its
/// communication stream wait for the caller's stream, and Work::wait() makes the caller's stream
/// wait for the collective (see docs/nccl.md). By default the caller's stream is CUDA's legacy
/// default stream (the one LibTorch uses unless a CUDAStreamGuard is active); a layer that knows
/// better (LibTorch with CUDA: at::cuda::getCurrentCUDAStream(device).stream()) installs a provider.
///
/// This header carries no CUDA types so that a layer built without CUDA headers can declare it.

#include <memory>
#include <vector>

namespace idist::nccl_backend {

/// Returns the cudaStream_t (as void*) the calling thread currently works on for CUDA device
/// `device_index`; nullptr means the legacy default stream.
using StreamProvider = void* (*)(int device_index);

/// Installs `provider` (nullptr restores the default). Thread-safe; affects collectives issued
/// afterwards. Exported from libidist for the LibTorch layer.
void set_stream_provider(StreamProvider provider) noexcept;

/// The caller's stream for `device_index` as void* (nullptr: legacy default stream).
void* caller_stream(int device_index) noexcept;

/// Keeps `object` (a tensor of the caller's, say) alive until the next collective issued on this
/// thread has completed on the GPU, even when the caller drops it and its Work earlier: LibTorch's
/// caching allocator would otherwise hand its memory to new tensors while NCCL still reads or
/// writes it (what record_stream / ProcessGroupNCCL's stashed tensors prevent).
void hold_for_next_collective(std::shared_ptr<void> object);

/// Takes what hold_for_next_collective() gathered on this thread (the collective being issued).
std::vector<std::shared_ptr<void>> take_held();

}  // namespace idist::nccl_backend
