#include "nccl/staging.hpp"

#include <algorithm>
#include <bit>

#include "nccl/cuda_error.hpp"
#include "nccl/device_guard.hpp"

namespace idist::nccl_backend {

namespace {
// Power-of-two size classes from 256 bytes keep reuse high; the cache stays bounded.
constexpr std::size_t kMinBlock = 256;
constexpr std::size_t kMaxCachedBytes = std::size_t(256) << 20;
}  // namespace

std::shared_ptr<PinnedPool> PinnedPool::create() { return std::shared_ptr<PinnedPool>(new PinnedPool()); }

PinnedPool::~PinnedPool() {
  for (const Block& b : free_) (void)cudaFreeHost(b.ptr);
  for (const Block& b : to_free_) (void)cudaFreeHost(b.ptr);
}

std::shared_ptr<void> PinnedPool::acquire(std::size_t bytes) {
  const std::size_t capacity = std::bit_ceil(std::max(bytes, kMinBlock));
  Block block{nullptr, 0};
  std::vector<Block> doomed;
  {
    std::lock_guard lock(mutex_);
    doomed.swap(to_free_);
    const auto it = std::find_if(free_.begin(), free_.end(), [&](const Block& b) { return b.capacity == capacity; });
    if (it != free_.end()) {
      block = *it;
      cached_bytes_ -= it->capacity;
      free_.erase(it);
    }
  }
  for (const Block& b : doomed) (void)cudaFreeHost(b.ptr);
  if (!block.ptr) {
    check_cuda(cudaMallocHost(&block.ptr, capacity), "cudaMallocHost of a staging block");
    block.capacity = capacity;
  }
  std::weak_ptr<PinnedPool> pool = weak_from_this();
  return std::shared_ptr<void>(block.ptr, [pool, block](void*) {
    if (auto p = pool.lock()) p->release(block);
  });
}

void PinnedPool::release(Block b) noexcept {
  std::lock_guard lock(mutex_);
  try {
    if (cached_bytes_ + b.capacity <= kMaxCachedBytes) {
      free_.push_back(b);
      cached_bytes_ += b.capacity;
    } else {
      to_free_.push_back(b);
    }
  } catch (...) {
    // Out of memory for the bookkeeping vector: leak the block rather than call CUDA from here.
  }
}

std::shared_ptr<void> device_scratch(std::size_t bytes, cudaStream_t stream, int device, bool stream_ordered) {
  void* p = nullptr;
  const std::size_t n = std::max<std::size_t>(bytes, 1);
  if (stream_ordered) {
    check_cuda(cudaMallocAsync(&p, n, stream), "cudaMallocAsync of a staging buffer");
    // Freed in stream order: after every operation enqueued on `stream` before the handle dies.
    return std::shared_ptr<void>(p, [stream, device](void* q) {
      DeviceGuard guard(device);
      (void)cudaFreeAsync(q, stream);
    });
  }
  check_cuda(cudaMalloc(&p, n), "cudaMalloc of a staging buffer");
  return std::shared_ptr<void>(p, [device](void* q) {
    DeviceGuard guard(device);
    (void)cudaFree(q);
  });
}

}  // namespace idist::nccl_backend
