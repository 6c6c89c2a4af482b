#pragma once
// Memory for staging host buffers through the device: page-locked host blocks (so that copies are
// truly asynchronous and never block the issuing thread) and stream-ordered device scratch.
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace idist::nccl_backend {

/// Reuses page-locked host blocks across collectives: cudaMallocHost is slow and cudaFreeHost
/// synchronises the device. Thread-safe.
class PinnedPool : public std::enable_shared_from_this<PinnedPool> {
 public:
  /// Creates a pool (always owned by a shared_ptr: blocks refer back to it).
  static std::shared_ptr<PinnedPool> create();
  /// Frees every cached block. A block still handed out returns to the pool when its handle dies;
  /// if the pool is gone by then it leaks (only when an aborted collective outlived the model).
  ~PinnedPool();

  /// A page-locked block of at least `bytes` bytes; it returns to the pool when the last copy of the
  /// handle is destroyed. The handle may be destroyed in a CUDA host callback: it never calls CUDA.
  /// @throws BackendError when cudaMallocHost fails.
  std::shared_ptr<void> acquire(std::size_t bytes);

 private:
  PinnedPool() = default;
  struct Block {
    void* ptr;
    std::size_t capacity;
  };
  void release(Block b) noexcept;

  std::mutex mutex_;
  std::vector<Block> free_;      // cached, ready for reuse
  std::vector<Block> to_free_;   // over the cache limit; freed by the next acquire (a CUDA-safe thread)
  std::size_t cached_bytes_ = 0;
};

/// Device memory of one collective. Stream-ordered (cudaMallocAsync / cudaFreeAsync on the
/// communication stream) where the device supports memory pools, else cudaMalloc, freed when the
/// handle is destroyed (after the collective completed).
/// @throws BackendError when the allocation fails.
std::shared_ptr<void> device_scratch(std::size_t bytes, cudaStream_t stream, int device, bool stream_ordered);

}  // namespace idist::nccl_backend
