#pragma once
// KeyValueStore over idist's rendezvous store.
#include <memory>
#include <string>
#include <vector>

#include "nccl/unique_id.hpp"
#include "store/store.hpp"

namespace idist::nccl_backend {

/// The unique-id exchange's view of an idist::store::Store: set, and wait + get.
class StoreKeyValue final : public KeyValueStore {
 public:
  explicit StoreKeyValue(std::shared_ptr<store::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, const std::vector<char>& value) override { store_->set(key, value); }
  std::vector<char> wait_get(const std::string& key, std::chrono::milliseconds timeout) override {
    store_->wait({key}, timeout);
    return store_->get(key);
  }
  void leave_without_waiting() override { store_->leave_without_waiting(); }

 private:
  std::shared_ptr<store::Store> store_;
};

}  // namespace idist::nccl_backend
