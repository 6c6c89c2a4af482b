#include "nccl/stream_provider.hpp"

#include <atomic>
#include <utility>

namespace idist::nccl_backend {

namespace {
std::atomic<StreamProvider> g_provider{nullptr};
thread_local std::vector<std::shared_ptr<void>> t_held;
}  // namespace

void set_stream_provider(StreamProvider provider) noexcept { g_provider.store(provider, std::memory_order_release); }

void* caller_stream(int device_index) noexcept {
  const StreamProvider p = g_provider.load(std::memory_order_acquire);
  return p ? p(device_index) : nullptr;
}

void hold_for_next_collective(std::shared_ptr<void> object) { t_held.push_back(std::move(object)); }

std::vector<std::shared_ptr<void>> take_held() { return std::exchange(t_held, {}); }

}  // namespace idist::nccl_backend
