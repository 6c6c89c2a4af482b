#pragma once
// Memory for staging host buffers through the device: page-locked host blocks (so that copies are
// truly asynchronous and never block the issuing thread) and device scratch.
//
// Nothing here frees memory while collectives run: cudaFreeHost and cudaFree synchronize the device,
// and a hung NCCL kernel would then block the issuing thread or the watchdog for good. Blocks go
// back to their pool and are freed when the model is torn down.
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace idist::nccl_backend {

/// Reuses blocks of page-locked host memory or of device memory across collectives. Thread-safe.
class BlockPool : public std::enable_shared_from_this<BlockPool> {
 public:
  enum class Kind { PinnedHost, Device };

  /// A pool of `kind` blocks (device blocks on CUDA device `device`). Always owned by a shared_ptr:
  /// handed-out blocks refer back to it.
  static std::shared_ptr<BlockPool> create(Kind kind, int device);
  /// Frees every block that came back. A block still handed out returns to the pool when its handle
  /// dies; if the pool is gone by then it leaks (only when an aborted collective outlived the model).
  ~BlockPool();
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  /// A block of at least `bytes` bytes (power-of-two size classes from 256 bytes). It returns to the
  /// pool when the last copy of the handle is destroyed; the handle may be destroyed in a CUDA host
  /// callback, as it never calls CUDA.
  /// @throws BackendError when the allocation fails.
  std::shared_ptr<void> acquire(std::size_t bytes);

 private:
  BlockPool(Kind kind, int device) : kind_(kind), device_(device) {}
  struct Block {
    void* ptr;
    std::size_t capacity;
  };
  void release(Block b) noexcept;

  Kind kind_;
  int device_;
  mutable std::mutex mutex_;
  std::vector<Block> free_;
};

/// Device scratch of one collective, used on `stream`. With `pool` null: stream-ordered
/// (cudaMallocAsync, and cudaFreeAsync on `stream` when the handle dies, i.e. after the work enqueued
/// before that). Else a block of `pool` (devices without memory pools), alive while the handle is.
/// @throws BackendError when the allocation fails.
std::shared_ptr<void> device_scratch(std::size_t bytes, cudaStream_t stream, int device, BlockPool* pool);

}  // namespace idist::nccl_backend
