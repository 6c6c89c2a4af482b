#include "nccl/nccl_staging.hpp"

#include <algorithm>
#include <bit>

#include "nccl/cuda_error.hpp"
#include "nccl/device_guard.hpp"

namespace idist::nccl_backend {

namespace {
constexpr std::size_t kMinBlock = 256;
}  // namespace

std::shared_ptr<BlockPool> BlockPool::create(Kind kind, int device) {
  return std::shared_ptr<BlockPool>(new BlockPool(kind, device));
}

BlockPool::~BlockPool() {
  DeviceGuard guard(device_);
  for (const Block& b : free_) (void)(kind_ == Kind::PinnedHost ? cudaFreeHost(b.ptr) : cudaFree(b.ptr));
}

std::shared_ptr<void> BlockPool::acquire(std::size_t bytes) {
  const std::size_t capacity = std::bit_ceil(std::max(bytes, kMinBlock));
  Block block{nullptr, 0};
  {
    std::lock_guard lock(mutex_);
    const auto it = std::find_if(free_.begin(), free_.end(), [&](const Block& b) { return b.capacity == capacity; });
    if (it != free_.end()) {
      block = *it;
      free_.erase(it);
    }
  }
  if (!block.ptr) {
    if (kind_ == Kind::PinnedHost) {
      check_cuda(cudaMallocHost(&block.ptr, capacity), "cudaMallocHost of a staging block");
    } else {
      DeviceGuard guard(device_);
      check_cuda(cudaMalloc(&block.ptr, capacity), "cudaMalloc of a staging block");
    }
    block.capacity = capacity;
  }
  std::weak_ptr<BlockPool> pool = weak_from_this();
  return std::shared_ptr<void>(block.ptr, [pool, block](void*) {
    if (auto p = pool.lock()) p->release(block);
  });
}

void BlockPool::release(Block b) noexcept {
  std::lock_guard lock(mutex_);
  try {
    free_.push_back(b);
  } catch (...) {
    // No memory for the bookkeeping: leak the block rather than call CUDA from here.
  }
}

std::shared_ptr<void> device_scratch(std::size_t bytes, cudaStream_t stream, int device, BlockPool* pool) {
  if (pool) return pool->acquire(bytes);
  void* p = nullptr;
  check_cuda(cudaMallocAsync(&p, std::max<std::size_t>(bytes, 1), stream), "cudaMallocAsync of a staging buffer");
  return std::shared_ptr<void>(p, [stream, device](void* q) {
    DeviceGuard guard(device);
    (void)cudaFreeAsync(q, stream);
  });
}

}  // namespace idist::nccl_backend
